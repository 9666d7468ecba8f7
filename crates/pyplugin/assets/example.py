"""Example server plugin for csg (Context Source Graph), written by `csg plugins init DIR`.

Every hook and table of this server (HOOKS_VERSION 1) is below, commented out: as written, this
file changes nothing and loads cleanly. Uncomment one block (remove the leading "# " of its code
lines) to get a working plugin; `csg plugins check DIR` tries it without data, index or server.
The full reference, with each payload and rule: `csg plugins api`.

Rules to remember: only the returned value is applied (None = no change); a public function
named like a hook or an UPPER_CASE name that is not a table rejects the file, so name helpers and
private constants with a leading "_"; files run in sorted name order (rename this file to e.g.
50_example.py). on_source_file is derived-state: the source of a file that defines it is part of
the index fingerprint, so editing that file costs an index rebuild; keep it in a file of its own.
"""

# ---- REQUIRES --------------------------------------------------------------------------------
# Refuse to load on a server whose hook set is not version 1 or that is another product,
# instead of running hooks against payloads that may have changed.
# REQUIRES = {"HOOKS_VERSION": ">=1,<2", "PRODUCT": "context-sourcegraph"}

# ---- QUERY_ALIASES (table) -------------------------------------------------------------------
# Replaces a term of a literal search query before the search (case-insensitively, unless the
# search is case_sensitive); the answer discloses the rewrite. Keys have no whitespace.
# QUERY_ALIASES = {
#     "k8s": "kubernetes",
#     "tf": "terraform",
# }

# ---- ALIASES (table) -------------------------------------------------------------------------
# Short names accepted wherever a repository is named (repo="kb"); put your repositories'
# owner/name on the right. A real repository with the same name as an alias wins.
# ALIASES = {
#     "kb": "acme/knowledge",
#     "infra": "acme/infra",
# }

# ---- TOOL_PRESETS (table) --------------------------------------------------------------------
# Adds an MCP tool "search_docs": the search tool with `path` fixed to docs/**, so it only finds
# documentation; callers pass the other search arguments (query, repo, ...) as usual.
# TOOL_PRESETS = {
#     "search_docs": {
#         "tool": "search",
#         "description": "Search the documentation (files under docs/) of the repositories you can read.",
#         "arguments": {"path": "docs/**"},
#     },
# }

# ---- on_startup (call-scoped) ----------------------------------------------------------------
# Runs once per epoch (server start and each reload); its return value is ignored.
# Here: one line on stderr naming the epoch and the plugin files it loaded.
# def on_startup(info):
#     import sys
#     files = ", ".join(info["plugin_files"])
#     print(f"server plugins, epoch {info['epoch']}: {files}", file=sys.stderr)
#     return None

# ---- on_tool_call (call-scoped) --------------------------------------------------------------
# Runs before each tool call and may return the complete new arguments of the same tool.
# Here: caps search's `limit` at 50; the answer then shows both argument objects and this file.
# def on_tool_call(call):
#     arguments = call["arguments"]
#     limit = arguments.get("limit")
#     if call["tool"] == "search" and isinstance(limit, int) and limit > 50:
#         return {"arguments": dict(arguments, limit=50)}
#     return None

# ---- on_search_results (call-scoped) ---------------------------------------------------------
# Runs after a search and may reorder, drop and annotate ("note") the hits it was given.
# Here: drops hits in vendored code and puts documentation hits first, with a note.
# def on_search_results(result):
#     hits = [hit for hit in result["hits"] if not hit["path"].startswith("vendor/")]
#     hits.sort(key=lambda hit: not hit["path"].startswith("docs/"))
#     for hit in hits:
#         if hit["path"].startswith("docs/"):
#             hit["note"] = "from the handbook"
#     return {"hits": hits}

# ---- on_read_result (call-scoped) ------------------------------------------------------------
# Runs after read/read_many and may add operator notes, shown in their own block after the text.
# Here: points readers of outdated docs to the current ones, keeping notes of earlier files.
# def on_read_result(result):
#     if any(item["path"].startswith("docs/legacy/") for item in result["items"]):
#         note = "docs/legacy/ is outdated; the current process is in docs/handbook/."
#         return {"notes": result.get("notes", []) + [note]}
#     return None

# ---- on_source_file (derived-state: editing it rebuilds the search index) --------------------
# Runs once per text file while the search index is built; may skip it or replace its text.
# Here: leaves minified and generated files out of search (`read` still returns them).
# def on_source_file(file):
#     path = file["path"]
#     if path.endswith((".min.js", ".min.css", ".pb.go")) or "/generated/" in "/" + path:
#         return {"skip": True}
#     return None
