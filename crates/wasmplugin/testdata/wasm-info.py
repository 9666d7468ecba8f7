#!/usr/bin/env python3
"""Lists a core Wasm module's imports, exports and custom sections; optionally checks the
repository-plugin contract (SPEC W-1, W-3, W-4, W-22, W-23). Standard library only, so
build-fixture.sh needs no Wasm tooling.

Usage: wasm-info.py [--check] FILE...
  --check  also verify, per file: exactly one `sourcegraph.plugin.v1` section holding JSON with
           `name` equal to the file name without `.sourcegraph.wasm`, `abi_version` 2 and
           `operations` an array of strings; exports `memory`, `alloc(i32)->i32`,
           `dealloc(i32,i32)`, `enrich(i32,i32)->i64`; every import from module `sourcegraph`
           with its ABI signature (no WASI, no `env`). Exits 1 on any failure.
"""
import json
import os
import sys

SECTION = "sourcegraph.plugin.v1"
VALTYPES = {0x7F: "i32", 0x7E: "i64", 0x7D: "f32", 0x7C: "f64", 0x7B: "v128", 0x70: "funcref", 0x6F: "externref"}
KINDS = {0: "func", 1: "table", 2: "memory", 3: "global", 4: "tag"}
EXPORTS = {"alloc": (("i32",), ("i32",)), "dealloc": (("i32", "i32"), ()), "enrich": (("i32", "i32"), ("i64",))}
IMPORTS = {"read_file": (("i32", "i32"), ("i64",)), "read_files": (("i32", "i32"), ("i64",)), "last_error": ((), ("i64",))}


class Reader:
    def __init__(self, buf, pos=0):
        self.buf, self.pos = buf, pos

    def byte(self):
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def uleb(self):
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return result

    def name(self):
        n = self.uleb()
        s = self.buf[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def limits(self):
        flags = self.byte()
        self.uleb()
        if flags & 1:
            self.uleb()


def parse(buf):
    if buf[:8] != b"\0asm\x01\0\0\0":
        raise ValueError("not a core Wasm module")
    r = Reader(buf, 8)
    types, imports, funcs, exports, customs = [], [], [], [], []
    while r.pos < len(buf):
        sid = r.byte()
        size = r.uleb()
        end = r.pos + size
        if sid == 0:
            name = r.name()
            customs.append((name, buf[r.pos:end]))
        elif sid == 1:
            for _ in range(r.uleb()):
                if r.byte() != 0x60:
                    raise ValueError("unsupported type form")
                params = tuple(VALTYPES.get(r.byte(), "?") for _ in range(r.uleb()))
                results = tuple(VALTYPES.get(r.byte(), "?") for _ in range(r.uleb()))
                types.append((params, results))
        elif sid == 2:
            for _ in range(r.uleb()):
                module, field, kind = r.name(), r.name(), r.byte()
                sig = None
                if kind == 0:
                    sig = r.uleb()
                elif kind == 1:
                    r.byte()
                    r.limits()
                elif kind == 2:
                    r.limits()
                elif kind == 3:
                    r.byte()
                    r.byte()
                else:
                    raise ValueError(f"unsupported import kind {kind}")
                imports.append((module, field, kind, sig))
        elif sid == 3:
            funcs = [r.uleb() for _ in range(r.uleb())]
        elif sid == 7:
            for _ in range(r.uleb()):
                field, kind, index = r.name(), r.byte(), r.uleb()
                exports.append((field, kind, index))
        r.pos = end
    imported_funcs = [sig for (_, _, kind, sig) in imports if kind == 0]
    func_types = imported_funcs + funcs

    def signature(type_index):
        return types[type_index] if type_index is not None and type_index < len(types) else None

    return {
        "imports": [(m, f, KINDS.get(k, k), signature(s) if k == 0 else None) for (m, f, k, s) in imports],
        "exports": [(f, KINDS.get(k, k), signature(func_types[i]) if k == 0 and i < len(func_types) else None)
                    for (f, k, i) in exports],
        "customs": customs,
    }


def fmt_sig(sig):
    if sig is None:
        return ""
    params, results = sig
    return f"({', '.join(params)})" + (f" -> {', '.join(results)}" if results else "")


def report(path, check):
    buf = open(path, "rb").read()
    try:
        info = parse(buf)
    except (ValueError, IndexError) as e:
        print(f"{path}: {e}")
        return False
    print(f"{path}: {len(buf)} bytes")
    for module, field, kind, sig in info["imports"]:
        print(f"  import {module}.{field} {kind}{fmt_sig(sig)}")
    for field, kind, sig in info["exports"]:
        print(f"  export {field} {kind}{fmt_sig(sig)}")
    for name, data in info["customs"]:
        shown = data.decode("utf-8", "replace") if name == SECTION else f"<{len(data)} bytes>"
        print(f"  custom {name!r}: {shown}")
    if not check:
        return True

    problems = []
    sections = [data for (name, data) in info["customs"] if name == SECTION]
    if len(sections) != 1:
        problems.append(f"{len(sections)} {SECTION} sections, want exactly 1")
    else:
        try:
            meta = json.loads(sections[0].decode("utf-8"))
            want = os.path.basename(path).removesuffix(".sourcegraph.wasm")
            if meta.get("name") != want:
                problems.append(f"metadata name {meta.get('name')!r} != file name {want!r}")
            if meta.get("abi_version") != 2 or isinstance(meta.get("abi_version"), bool):
                problems.append("metadata abi_version is not 2")
            ops = meta.get("operations")
            if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
                problems.append("metadata operations is not an array of strings")
        except (UnicodeDecodeError, json.JSONDecodeError, AttributeError) as e:
            problems.append(f"metadata is not a JSON object: {e}")
    exports = {field: (kind, sig) for (field, kind, sig) in info["exports"]}
    if exports.get("memory", (None,))[0] != "memory":
        problems.append("no exported memory `memory`")
    for field, sig in EXPORTS.items():
        if exports.get(field) != ("func", sig):
            problems.append(f"export {field} missing or not {fmt_sig(sig)}")
    for module, field, kind, sig in info["imports"]:
        if module != "sourcegraph" or kind != "func" or IMPORTS.get(field) != sig:
            problems.append(f"unexpected import {module}.{field} {kind}{fmt_sig(sig)}")
    for p in problems:
        print(f"  PROBLEM: {p}")
    print("  contract: " + ("ok" if not problems else "FAILED"))
    return not problems


def main(argv):
    check = "--check" in argv
    files = [a for a in argv if a != "--check"]
    if not files:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    results = [report(f, check) for f in files]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
