#!/usr/bin/env python3
"""Server CPU of a `csg` read workload by cost centre, from a `perf record --call-graph` file.

Usage: bench/perf_breakdown.py PERF_DATA [US_PER_CALL] [-v]

Record one with `bench/read --only stdio --perf PERF_DATA` (perf attached to the `csg mcp`
server for the measured calls only). Every sample is put in one cost centre: its stack is
walked from the innermost frame outwards and the first frame that matches a rule below decides
(so a `malloc` or a `gix` call made by revision resolution counts as revision resolution, a
`serde_json` call made by rmcp counts as JSON). A second table classifies the leaf frame alone
(allocation, memcpy, zlib, SQLite, kernel, ...), across all cost centres.
With US_PER_CALL (the server CPU per call bench/read printed for that run), each share is also
shown in µs per call. -v lists the top leaf frames of each cost centre.

Samples whose leaf is in the kernel are put by system call instead (futex = threads parking and
waking each other, e.g. the tokio worker handing a read to a `spawn_blocking` thread; epoll_wait
= the runtime's I/O driver; write/read = the transport's pipe or socket). Under a hypervisor
without a PMU perf samples `cpu-clock`, which books time spent with interrupts off (context
switches) at the point they are turned back on (`finish_task_switch`, `_raw_spin_unlock_irq*`).
"""

import re
import subprocess
import sys
from collections import Counter

# (cost centre, regex on a demangled frame), tried for each frame from the innermost outwards.
CENTRES = [
    ("logging/tracing", r"^(<?tracing|<?tracing_core|<?tracing_subscriber)|::tracing::"),
    ("registry refresh (change counter, data_version)", r"gitstore::.*(refresh|data_version|reconcile)"),
    ("retention check", r"gitstore::.*(is_retained|check_readable|retention)"),
    ("blob lookup + inflate (gix)", r"gitstore::.*(read_text|read_bytes|blob_reader|with_tree|tree_in|text_in|objects::|handles::)"),
    ("lease", r"gitstore::.*(lease|release|Lease)"),
    ("revision resolution", r"gitstore::.*resolve"),
    ("line cutting (service::lines)", r"service::lines::"),
    ("rendering (mcpserver::render)", r"mcpserver::render"),
    ("registration lookup (SQLite query)", r"gitstore::db::|gitstore::store::Inner::repo$"),
    ("plugin enrichment", r"service::enrich|wasmplugin::|wasmtime"),
    ("JSON (serde, serde_json)", r"^<?(serde_json|serde)::|serde_json|::serde::"),
    ("transport: rmcp", r"^<?rmcp::|rmcp::"),
    ("transport: mcpserver glue", r"^<?mcpserver::"),
    ("transport: HTTP (hyper, axum, tower, http)", r"^<?(hyper|hyper_util|axum|axum_core|tower|tower_http|http|httparse|h2)::"),
    ("async runtime + I/O (tokio)", r"^<?(tokio|mio|tokio_util)::|tokio::"),
]

LEAVES = [
    ("allocation (malloc/free)", r"malloc|free|realloc|calloc|_int_|tcache|arena|sysmalloc|__rust_(alloc|dealloc|realloc)"),
    ("memcpy/memmove/memset/memchr", r"mem(cpy|move|set|chr|cmp)|__memc|__memm"),
    ("zlib inflate", r"inflate|zlib|miniz|adler|crc32"),
    ("SQLite", r"sqlite3|rusqlite"),
    ("SHA-1", r"sha1|Sha1"),
    ("UTF-8 validation", r"from_utf8|run_utf8_validation"),
    ("JSON (serde, serde_json)", r"serde"),
    ("tracing", r"tracing"),
    ("futex/locks", r"futex|pthread_mutex|pthread_cond|parking_lot|RwLock|Mutex"),
]


KERNEL = [
    ("kernel: futex wake (waking a parked thread)", r"futex_wake|wake_up_q|try_to_wake_up"),
    ("kernel: futex wait (a thread parks)", r"futex"),
    ("kernel: epoll_wait (I/O driver)", r"epoll"),
    ("kernel: write (transport out)", r"sys_write|ksys_write|vfs_write"),
    ("kernel: read (transport in)", r"sys_read|ksys_read|vfs_read"),
    ("kernel: fcntl (SQLite file locks)", r"fcntl"),
    ("kernel: sendto/recvfrom (sockets)", r"sendto|recvfrom|sendmsg|recvmsg"),
    ("kernel: mmap/munmap/madvise (allocator)", r"mmap|munmap|madvise|brk"),
]

USER_ENTRY = [
    ("kernel: futex wait (a thread parks)", r"^syscall$|futex"),
    ("kernel: epoll_wait (I/O driver)", r"epoll"),
    ("kernel: write (transport out)", r"libc_write|^write$|writev"),
    ("kernel: read (transport in)", r"libc_read|^read$|readv"),
    ("kernel: fcntl (SQLite file locks)", r"fcntl"),
    ("kernel: sendto/recvfrom (sockets)", r"send|recv"),
    ("kernel: mmap/munmap/madvise (allocator)", r"mmap|munmap|madvise|brk"),
]


def kernel_centre(stack):
    """The cost centre of a sample taken in the kernel, by its system call."""
    kernel = [f for f in stack if f.startswith("[k]")]
    calls = [f for f in kernel if "__x64_sys_" in f or "__do_sys_" in f]
    # The wait/wake distinction comes from the innermost futex frame, the rest from the call.
    for name, rule in KERNEL:
        if name.startswith("kernel: futex") and calls and "futex" in calls[-1]:
            if any(re.search(rule, f) for f in kernel):
                return name
            continue
        if calls and re.search(rule, calls[-1]):
            return name
    # No system call frame unwound: the libc wrapper the thread entered the kernel from.
    user = next((f for f in stack if not f.startswith("[k]")), "")
    for name, rule in USER_ENTRY:
        if re.search(rule, user):
            return name
    return "kernel: interrupts, page faults, other"


def frames_of(perf_data):
    """Yields the frames (innermost first) of every sample of the `csg` process."""
    out = subprocess.run(
        ["perf", "script", "-i", perf_data, "-F", "comm,tid,ip,sym,dso"],
        check=True,
        capture_output=True,
        text=True,
        errors="replace",
    ).stdout
    stack = []
    for line in out.splitlines() + [""]:
        if not line.strip():
            if stack:
                yield stack
            stack = []
            continue
        if not line[0].isspace():
            stack = []
            continue
        text = line.strip()
        # "<addr> <symbol>+0x<off> (<dso>)" or "<addr> [unknown] (<dso>)"
        parts = text.split(" ", 1)
        rest = parts[1] if len(parts) > 1 else ""
        dso = ""
        match = re.match(r"^(.*) \(([^()]*)\)$", rest)
        if match:
            rest, dso = match.group(1), match.group(2)
        sym = re.sub(r"\+0x[0-9a-f]+$", "", rest)
        if sym == "[unknown]":
            sym = "[unknown " + dso.rsplit("/", 1)[-1] + "]"
        if "kernel" in dso:
            sym = "[k] " + sym
        stack.append(sym)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    numbers = [a for a in sys.argv[2:] if a != "-v"]
    per_call = float(numbers[0]) if numbers else None
    centres, leaves, total = Counter(), Counter(), 0
    others = Counter()
    detail = {}
    for stack in frames_of(sys.argv[1]):
        total += 1
        centre = kernel_centre(stack) if stack[0].startswith("[k]") else None
        for frame in [] if centre else stack:
            for name, rule in CENTRES:
                if re.search(rule, frame):
                    centre = name
                    break
            if centre:
                break
        if centre is None and any(re.search(r"^<?(service|gitstore)::", f) for f in stack):
            centre = "other service/gitstore code"
        if centre is None:
            centre = "kernel (syscalls, scheduling)" if stack[0].startswith("[k]") else "other"
            if centre == "other":
                others[stack[0]] += 1
        centres[centre] += 1
        detail.setdefault(centre, Counter())[stack[0]] += 1
        leaf = "kernel" if stack[0].startswith("[k]") else None
        if leaf is None:
            for name, rule in LEAVES:
                if re.search(rule, stack[0]):
                    leaf = name
                    break
        leaves[leaf or "other (code of its own)"] += 1
    if total == 0:
        sys.exit("no samples")

    def table(title, counter):
        print(f"\n{title} ({total} samples)")
        for name, n in counter.most_common():
            share = 100.0 * n / total
            us = f"  {share / 100.0 * per_call:7.1f} µs/call" if per_call else ""
            print(f"  {share:6.1f}%{us}  {name}")

    table("cost centre (innermost matching frame)", centres)
    table("leaf frame", leaves)
    if "-v" in sys.argv:
        for centre, leaves_of in detail.items():
            print(f"\n{centre}: top leaf frames")
            for name, n in leaves_of.most_common(6):
                print(f"  {100.0 * n / total:6.1f}%  {name[:140]}")
    if others:
        print("\ntop leaves counted as `other`:")
        for name, n in others.most_common(12):
            print(f"  {100.0 * n / total:6.1f}%  {name[:140]}")


if __name__ == "__main__":
    main()
