"""Server-plugin hook reference of csg (Context Source Graph), HOOKS_VERSION 1.

DO NOT PUT THIS FILE INTO THE PLUGINS DIRECTORY. It is documentation shipped inside the csg
binary (`csg plugins api` prints it, `csg plugins api --out FILE` writes it). In the plugins
directory it would load as a plugin and be rejected: its version constants are upper-case names
that are not tables. For a file to start from, run `csg plugins init DIR` (writes example.py).

The blocks between "# <generated:…>" and "# </generated:…>" lines are generated from the very
definitions the server uses (hook names and classes, sample payloads, applied keys, tables,
presetable tools, versions), so they are what this server does.

At a glance
  # <generated:hooks>
  Hooks of this server (HOOKS_VERSION 1):
    on_startup(info)            call-scoped    applies: nothing (the result is ignored)
    on_tool_call(call)          call-scoped    applies: arguments
    on_search_results(result)   call-scoped    applies: hits
    on_read_result(result)      call-scoped    applies: notes
    on_source_file(file)        derived-state  applies: skip, text, language
  Tables: QUERY_ALIASES, ALIASES, TOOL_PRESETS. Version pin: REQUIRES (HOST_CONTRACT_VERSION,
    HOOKS_VERSION, PRODUCT).
  # </generated:hooks>

The model in five lines
  1. One plugin = one .py file in the plugins directory. No base class, decorator, registration,
     manifest, build step or import is needed.
  2. An empty file is a valid plugin that changes nothing. A hook you do not define does not run.
  3. Only the returned value is applied. A hook gets a deep copy of plain data (str, int, float,
     bool, None, list, dict); changing it and forgetting `return` changes nothing; None means
     no change.
  4. Typos are loud. A function defined in the file whose name starts with `on_` or is within
     edit distance 2 of a hook name must be a hook; an UPPER_CASE name must be QUERY_ALIASES,
     ALIASES, TOOL_PRESETS or REQUIRES. Anything else rejects the whole file (reported and
     skipped; the other files load) with the offending name, the nearest allowed name and the
     allowed list. Helpers and private constants start with `_`; imports are free (`import re`).
  5. A failing hook is isolated. Any exception (BaseException, so sys.exit() too) is logged with
     file, hook and traceback; the call answers as if that plugin were absent; a call-scoped hook
     is then disabled until the next reload (derived-state hooks: see below).

Order and pipelines
  Files run in sorted file-name order (name them 10_aliases.py, 20_notes.py, ...). Each hook is
  a pipeline: the value returned by one file is the input of the next file's same hook; a file
  returning None passes its input on unchanged. Return plain data only. A result that breaks
  the rules of its hook is discarded, as if that file had returned None. After the last file
  the server measures limits again, recomputes counts from what was returned and validates the
  answer; an answer that does not validate is discarded for the unmodified one.

Hook classes: what an edit costs
  call-scoped (on_startup, on_tool_call, on_search_results, on_read_result): affects one call
    only. Edit the file, reload, and it applies from the next call; nothing is rebuilt.
  derived-state (on_source_file): shapes the persisted search index. The source of every file
    that defines it is part of the index fingerprint, so editing such a file (any line of it)
    marks the index stale: plugin_status says "index stale: rebuild pending". A reload does not
    change the derived-state hooks in use; the next start, `prepare` with action "reindex" or
    `csg index rebuild` builds a new index generation while the published one keeps
    answering. On a large corpus that takes long: first check whether a call-scoped hook or a
    table gives the effect, and keep on_source_file in a file of its own.
    A failing derived-state hook leaves its unit (one file) indexed as if the hook were absent
    and is counted in the build summary; with SOURCEGRAPH_SERVER_PLUGINS_STRICT=true it fails
    the build instead, and the published index keeps answering.

Time limit
  Each hook call has a time limit (default 2 s; the value in effect is settings["hook_timeout_ms"]
  of on_startup). An overrunning hook is interrupted by a watchdog that raises an exception into
  it; it counts as failed (see line 5). A hook that cannot be interrupted wedges the subsystem
  until csg is restarted: one that catches BaseException (a bare `except:`) and carries on, or
  one blocked in C code (time.sleep, a blocking socket or subprocess call). Wedged means every
  hook is bypassed (calls answer as without server plugins), plugin_status says a restart is
  needed and reload_plugins refuses. So: no bare `except:`, no sleeping, no network calls.

Enabling
  Off by default. SOURCEGRAPH_SERVER_PLUGINS_ENABLED=true turns it on; the directory is
  SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY (default `plugins/` under the data directory). Disabled,
  the directory is never read and reload_plugins answers that the subsystem is disabled.
  (SOURCEGRAPH_PLUGINS_* and the connection parameter `plugins` concern repository Wasm plugins.)

Lifecycle of a plugin
  1. Read this file.                      csg plugins api [--out /tmp/plugin_api.py]
  2. Get every hook and table, commented. csg plugins init DIR       (writes DIR/example.py)
  3. Write one file; its name sets its place in the order.
  4. Dry-run: no data, no index, no server. csg plugins check DIR
     Loads each file, checks names, tables and REQUIRES, runs each hook once on the sample
     payload shown below; prints a report, exits non-zero on any rejection.
  5. Mount or copy DIR to SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY.
  6. Reload and look:  csg plugins reload; csg plugins status   (--server URL, token from
     SOURCEGRAPH_API_TOKEN), or the MCP tools reload_plugins (needs the prepare capability when
     auth is on) and plugin_status, or GET /sourcegraph/api/plugins/status. Status shows the
     epoch, loaded files, disabled hooks and why, rejected files and why, and the versions.
  Each reload loads every file afresh (new module objects, module globals start over) into a new
  epoch; a call in flight finishes on the epoch it started with.

Guarantees to callers
  Secrets reach on_startup only as booleans "set / not set"; the caller appears in payloads only
  as {"authenticated": bool}. A rewrite of a call's arguments (on_tool_call, QUERY_ALIASES) is
  disclosed in the answer: an `ArgumentsRewritten:` block with the plugin file and the original
  and effective arguments as JSON.

Versions and REQUIRES
  A plugin may pin the published versions below; on a mismatch it is not loaded and the message
  names both sides. Integer versions take an exact int or a string of comma-separated
  comparisons `==N`, `!=N`, `>=N`, `>N`, `<=N`, `<N`; PRODUCT takes an exact string:
      REQUIRES = {"HOOKS_VERSION": ">=1,<2", "PRODUCT": "context-sourcegraph"}
      REQUIRES = {"HOST_CONTRACT_VERSION": 1}
"""

# <generated:versions>
HOST_CONTRACT_VERSION = 1
HOOKS_VERSION = 1
PRODUCT = "context-sourcegraph"
# </generated:versions>


def on_startup(info):
    r"""call-scoped. Runs once each time an epoch loads: at server start and after each reload.

    Payload (the sample `csg plugins check` runs the hook on):
        # <generated:payload:on_startup>
        {
            "epoch": 1,
            "hooks_version": 1,
            "host_contract_version": 1,
            "plugin_files": ["example.py"],
            "product": "context-sourcegraph",
            "secrets": {},
            "settings": {},
            "version": "0.1.0",
        }
        # </generated:payload:on_startup>
    In a server, "settings" and "secrets" hold its configuration, for example:
        {"settings": {"public_read": True, "hook_timeout_ms": 2000, "strict": False},
         "secrets": {"SOURCEGRAPH_API_TOKEN": False, "CSG_ADMIN_PASSWORD": True}}

    # <generated:applied:on_startup>
    Applied keys: none; the return value is ignored.
    # </generated:applied:on_startup>
    Use it to prepare private module state for the other hooks of the same file. `secrets`
    lists every secret-looking setting (its name contains TOKEN, KEY, SECRET or PASSWORD) as a
    boolean "set / not set"; the value itself never reaches a plugin. Read `settings` and
    `secrets` with .get(): the names they hold depend on the configuration (the sample payload
    of `csg plugins check` has none).

    Example:
        import sys

        def on_startup(info):
            files = ", ".join(info["plugin_files"])
            print(f"server plugins, epoch {info['epoch']}: {files}", file=sys.stderr)
            return None
    """
    return None


def on_tool_call(call):
    r"""call-scoped. Runs before an MCP or JSON-API tool runs; may rewrite its arguments.

    Payload:
        # <generated:payload:on_tool_call>
        {
            "arguments": {"query": "k8s deploy", "repo": "acme/infra"},
            "caller": {"authenticated": False},
            "tool": "search",
        }
        # </generated:payload:on_tool_call>

    # <generated:applied:on_tool_call>
    Applied keys: "arguments"; any other key makes the result invalid.
    # </generated:applied:on_tool_call>
    Return None, or {"arguments": {...}}: the complete new arguments object for the same tool
    (not a patch; copy what you keep). The tool cannot be changed: "tool" is not applied. The
    new arguments must pass the tool's strict argument check, otherwise the rewrite is
    discarded. When the arguments changed, the answer ends with a disclosure block naming the
    plugin file and both argument objects.

    Example:
        def on_tool_call(call):
            arguments = call["arguments"]
            limit = arguments.get("limit")
            if call["tool"] == "search" and isinstance(limit, int) and limit > 50:
                return {"arguments": dict(arguments, limit=50)}
            return None
    """
    return None


def on_search_results(result):
    r"""call-scoped. Runs after a search, before the answer is rendered.

    Payload:
        # <generated:payload:on_search_results>
        {
            "caller": {"authenticated": False},
            "hits": [
                {
                    "commit": "0123456789abcdef0123456789abcdef01234567",
                    "line": 12,
                    "path": "deploy/k8s.yaml",
                    "repo": "acme/infra",
                    "snippet": "kind: Deployment",
                },
                {
                    "commit": "0123456789abcdef0123456789abcdef01234567",
                    "line": 3,
                    "path": "docs/deploy.md",
                    "repo": "acme/infra",
                    "snippet": "How we deploy to kubernetes",
                },
            ],
            "query": "kubernetes deploy",
        }
        # </generated:payload:on_search_results>

    # <generated:applied:on_search_results>
    Applied keys: "hits"; any other key makes the result invalid. Each hit keeps "repo",
    "commit", "path", "line", "snippet" as given and may add "note": one line of at most 1024
    characters.
    # </generated:applied:on_search_results>
    Return None, or {"hits": [...]}: a reordered and/or shortened list of the hits given.
    Each returned hit must be one of the given hits (same repo, commit, path, line, snippet),
    each at most once, and may carry one extra key "note": a string of at most 1024 characters
    on one line, shown after the hit. Anything else (a new hit, a changed snippet, a
    wrong type, another key) makes the whole result invalid and it is discarded. File-name
    matches are not in the payload and are kept as they are. Counts are recomputed from the
    hits returned.

    Example:
        def on_search_results(result):
            hits = [hit for hit in result["hits"] if not hit["path"].startswith("vendor/")]
            hits.sort(key=lambda hit: not hit["path"].startswith("docs/"))
            for hit in hits:
                if hit["path"].startswith("docs/"):
                    hit["note"] = "from the handbook"
            return {"hits": hits}
    """
    return None


def on_read_result(result):
    r"""call-scoped. Runs after `read` / `read_many`, before the answer is rendered.

    Payload (an item that failed has "path" and "error" only):
        # <generated:payload:on_read_result>
        {
            "caller": {"authenticated": False},
            "commit": "0123456789abcdef0123456789abcdef01234567",
            "items": [
                {
                    "end_line": 2,
                    "has_more": False,
                    "path": "docs/a.md",
                    "start_line": 1,
                    "text": "# Onboarding\nRead the handbook first.\n",
                    "total_lines": 2,
                },
                {"error": "no such file at this commit", "path": "docs/missing.md"},
            ],
            "notes": [],
            "repo": "acme/kb",
            "tool": "read",
        }
        # </generated:payload:on_read_result>

    # <generated:applied:on_read_result>
    Applied keys: "notes": at most 16 str of at most 65536 bytes each; any other key makes the
    result invalid.
    # </generated:applied:on_read_result>
    Return None, or {"notes": ["...", ...]}: operator notes (at most 16 strings, each
    at most 64 KiB) appended to the answer as their own `OperatorNotes:` block. The file text
    is never replaced. Notes of several files accumulate: each file receives the payload with
    "notes" holding the notes so far and returns the full new list, so keep what you got.

    Example:
        def on_read_result(result):
            if any(item["path"].startswith("docs/legacy/") for item in result["items"]):
                note = "docs/legacy/ is outdated; the current process is in docs/handbook/."
                return {"notes": result.get("notes", []) + [note]}
            return None
    """
    return None


def on_source_file(file):
    r"""derived-state. Runs once per text file while the search index is built.

    Payload ("language" is the search language name of the path, or None):
        # <generated:payload:on_source_file>
        {
            "commit": "0123456789abcdef0123456789abcdef01234567",
            "language": "markdown",
            "path": "docs/a.md",
            "repo": "acme/kb",
            "text": "# Onboarding\nRead the handbook first.\n",
        }
        # </generated:payload:on_source_file>

    # <generated:applied:on_source_file>
    Applied keys: "skip" alone, or "text" and "language" (either or both); any other key makes
    the result invalid.
    # </generated:applied:on_source_file>
    Return None (index the file as it is), {"skip": True} (leave the file out of the
    index; later files' on_source_file do not see it), or {"text": "...", "language": "..."}
    with either key or both (index this text instead; index under this language, which the
    search `lang` filter matches: a name or alias of its table, or None for none). This
    changes what search finds, never what `read` returns. Editing a file that defines this
    hook marks the index stale and costs a rebuild (see "Hook classes" above).

    Example:
        def on_source_file(file):
            if file["path"].endswith((".min.js", ".min.css", ".pb.go")):
                return {"skip": True}
            return None
    """
    return None


# ---------------------------------------------------------------------------------------------
# Declarative tables
#
# Module-level constants that the server reads once, as data, when the file loads. A table
# cannot fail at call time and runs no plugin code on the path it affects. An invalid entry
# rejects the whole file, naming the entry and the reason. Prefer a table to a hook whenever the
# answer does not depend on the call.
#
# QUERY_ALIASES: search-term replacements, str -> non-empty str; keys non-empty, no whitespace.
#   In a literal (non-regex) search query, each whitespace-separated term equal to a key
#   (case-insensitively, unless case_sensitive) is replaced by its value before the search.
#   Disclosed like an argument rewrite.
#
#       QUERY_ALIASES = {"k8s": "kubernetes", "tf": "terraform"}
#
# ALIASES: extra repository names, alias -> repository name. An alias is 1..128 characters of
#   A-Z a-z 0-9 . _ - /; the value is a repository name `owner/name`. Accepted wherever a
#   repository is named (repo="kb"); a real repository of the same name as an alias wins for
#   callers who may read it (for anyone else it does not exist, so the alias applies).
#
#       ALIASES = {"kb": "acme/knowledge", "infra": "acme/infra"}
#
# TOOL_PRESETS: new MCP tools that are an existing tool with fixed arguments. The name matches
#   [a-z][a-z0-9_]{0,63} and is not a built-in tool. The value is a dict with "tool" (one of
#   the tools below), "description" (non-empty str of at most 1024 characters) and "arguments"
#   (a dict of that tool's argument names). Each value is checked when the file loads against
#   the tool's input schema as tools/list shows it (type, range, nested keys): a bad value
#   rejects the file, naming the entry. The preset appears as a new MCP tool whose arguments are
#   the base tool's minus the fixed ones.
#   The tools a preset can use, with their arguments:
# <generated:presets>
#     read: repo, path, end_line?, plugins?, revision?, start_line?
#     read_many: repo, files, plugins?, revision?
#     search: query, author?, case_sensitive?, count?, cursor?, lang?, limit?, path?, regex?, repo?, revision?, since?, type?, until?
#     list: repo, depth?, path?, revision?
#     resolve: repo, revision
#     log: repo, cursor?, follow?, limit?, path?, revision?
#     commit: repo, revision
#     diff: repo, base, head, cursor?, path?
#     blame: repo, path, end_line?, revision?, start_line?
#     outline: repo, path, cursor?, revision?
#     definitions: symbol, lang?, limit?, path?, repo?, revision?
#     references: symbol, cursor?, lang?, limit?, path?, repo?, revision?
#     discovery: (no arguments)
#     availability: repo, include_plugins?, revision?
# </generated:presets>
#
#       TOOL_PRESETS = {
#           "search_docs": {
#               "tool": "search",
#               "description": "Search the handbook.",
#               "arguments": {"repo": "acme/kb", "path": "docs/**"},
#           },
#       }
# ---------------------------------------------------------------------------------------------


# =============================================================================================
# BEGIN host isolation (maintained with crates/pyplugin/src/interp/guard.rs; not generated)
#
# A plugin runs inside the server process. The host does not sandbox it; it makes sure that
# what a plugin does by mistake costs that plugin, not the server. What it does, and what it
# cannot prevent:
#
# Time. Every line of plugin code runs under the time limit of a hook call (P-23): the hooks,
#   on_startup, the file's top-level code at load, what runs while the host inspects the file's
#   names (a property such as __class__, a __signature__), formatting an exception (__str__,
#   __repr__ of the exception and its arguments; a failure message is cut to 16 KiB), converting
#   and freeing a returned value, and __del__ of plugin objects (when a reload releases an
#   epoch, its objects are collected at once, under the limit). Overrunning code is interrupted
#   (an overrunning load rejects the file, an overrunning hook is disabled); code that cannot be
#   interrupted wedges the subsystem (see "Time limit" above).
#
# Recursion. The interpreter runs with a recursion limit of 1000 on a 64 MiB stack, and the
#   threads a plugin starts get 64 MiB too, so deep recursion, also through C code
#   (sorted(key=...), map(), functools.reduce(), __eq__ chains), raises RecursionError: an
#   ordinary hook failure. sys.setrecursionlimit() above 1000 and threading.stack_size() below
#   64 MiB raise PluginForbidden.
#
# Ending or signalling the process: neutralised. Before any plugin code runs, these are
#   replaced by functions that raise PluginForbidden (a RuntimeError) in the server process:
#     os._exit, os.abort, os.execv, os.execve (so every os.exec*), os.kill and os.killpg of
#     the server's own process or process group (pid 0, -1, os.getpid(), -os.getpgid(0)),
#     signal.signal, signal.raise_signal, signal.pthread_kill, signal.alarm, signal.setitimer,
#     signal.siginterrupt, _thread.interrupt_main, faulthandler.register and its crash helpers
#     (faulthandler._sigsegv, ...), faulthandler.dump_traceback_later(exit=True),
#     resource.setrlimit, resource.prlimit, and sys.setswitchinterval() above its default
#     (a thread would keep the interpreter from every call).
#   The same names in the posix and _signal modules are replaced too. Signalling other
#   processes, signal 0 and, in a child a plugin forked, os._exit and exec work as usual.
#   sys.exit() in a hook raises SystemExit, a failure like any other; in a thread the plugin
#   started it ends only that thread (CPython's rule).
#
# Secrets. os.environ, os.environb, os.getenv() and posix.environ as plugins see them have no
#   variable whose name contains TOKEN, SECRET, PASSWORD or KEY (in any case) and none whose
#   value holds credentials in a URL (scheme://user:password@... or scheme://token@...) (P-11).
#   Only the interpreter's copy is scrubbed: the server's own environment is unchanged.
#
# Threads a plugin starts. The host does not stop them: they keep running across reloads (on
#   the module objects of the epoch that started them) until they end or the server restarts;
#   each reload starts the file's top-level code again, so a file that starts a thread at load
#   starts another one per reload. A call waits for the interpreter (its queue and the
#   interpreter lock) at most the hook time limit; past it the call answers as without server
#   plugins and is counted (plugin_status: interpreter_wait_timeouts). So a thread that keeps
#   the interpreter in C code (a long sum(), a regular expression) slows calls to that limit
#   and makes them answer without plugins; if it keeps it while a hook runs, the subsystem
#   wedges. A reload that cannot start for the hook time limit plus its grace is refused
#   (nothing changes; reload again once the thread lets go).
#
# What the host cannot prevent (documented, not enforced):
#   - ctypes, cffi or any C extension: calling exit(), abort(), kill() or writing memory from C
#     ends the process; C code that never returns to Python wedges the subsystem.
#   - Other processes: subprocess, os.system, os.posix_spawn can run `kill` on the server, and
#     children get the process's real environment (secrets included), as does reading
#     /proc/self/environ. os.fork() copies the whole server.
#   - Recursion inside C code alone (no Python frames between levels, e.g. a chain of a million
#     nested map() objects) is not counted by CPython 3.11 and can overflow any stack.
#   - Memory: a plugin can exhaust the process's memory.
#   - Deliberate circumvention: the original functions stay reachable to code that looks for
#     them (the replacements' closures, ctypes). The guarantees are against accidents.
# END host isolation
# =============================================================================================
