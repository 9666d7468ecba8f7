//! Large valid plugin modules for compile-time tests and measurements (O-9, W-30): the four
//! ABI exports plus as many filler functions as it takes to reach a size. Written as binary
//! directly, because the text of a 32 MiB module would take `wat` longer than compiling it.
//!
//! Each filler function is a few KiB of loads, stores, arithmetic, blocks with branches and
//! calls to its predecessor: the kind of code Cranelift spends its time on in real plugins
//! (register allocation over many live values), not a single giant function.

/// Bytes of one filler function's body, roughly.
const FUNCTION_BYTES: usize = 2048;

/// A valid module of about `bytes` bytes (a function's size more at most) that passes the
/// host's static checks.
/// `salt` changes every constant, so two modules of one size are different artifacts.
pub fn module(bytes: usize, salt: u32) -> Vec<u8> {
    let mut bodies = vec![
        // alloc: (i32) -> i32
        body(&[0x41, 0x10, 0x0b], &[]),
        // dealloc: (i32, i32) -> ()
        body(&[0x0b], &[]),
        // enrich: (i32, i32) -> i64
        body(&[0x42, 0x00, 0x0b], &[]),
    ];
    let mut total = 0;
    let mut index = 3u32;
    while total < bytes {
        let filler = filler(index, salt);
        // Its body, its length before it and its type index in the function section.
        total += filler.len() + 4;
        bodies.push(filler);
        index += 1;
    }
    let fillers = bodies.len() - 3;

    let mut out = b"\0asm\x01\0\0\0".to_vec();
    // Types: 0 (i32)->i32, 1 (i32 i32)->(), 2 (i32 i32)->i64.
    section(
        &mut out,
        1,
        &[
            &[0x03][..],
            &[0x60, 0x01, 0x7f, 0x01, 0x7f],
            &[0x60, 0x02, 0x7f, 0x7f, 0x00],
            &[0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7e],
        ]
        .concat(),
    );
    let mut functions = leb(bodies.len() as u64);
    functions.extend([0x00, 0x01, 0x02]);
    functions.extend(std::iter::repeat_n(0x00, fillers));
    section(&mut out, 3, &functions);
    // One memory of one page, no maximum.
    section(&mut out, 5, &[0x01, 0x00, 0x01]);
    let mut exports = leb(4);
    for (name, kind, index) in [
        ("memory", 0x02, 0),
        ("alloc", 0x00, 0),
        ("dealloc", 0x00, 1),
        ("enrich", 0x00, 2),
    ] {
        exports.extend(leb(name.len() as u64));
        exports.extend(name.as_bytes());
        exports.push(kind);
        exports.extend(leb(index));
    }
    section(&mut out, 7, &exports);
    let mut code = leb(bodies.len() as u64);
    for body in &bodies {
        code.extend(leb(body.len() as u64));
        code.extend(body);
    }
    section(&mut out, 10, &code);
    out
}

/// A function body: local declarations (`(count, type)`), then `code` (ending in `end`).
fn body(code: &[u8], locals: &[(u32, u8)]) -> Vec<u8> {
    let mut out = leb(locals.len() as u64);
    for &(count, ty) in locals {
        out.extend(leb(u64::from(count)));
        out.push(ty);
    }
    out.extend(code);
    out
}

/// Filler function `index`: `(param i32) (result i32)` with three more i32 locals.
fn filler(index: u32, salt: u32) -> Vec<u8> {
    let mut code = Vec::with_capacity(FUNCTION_BYTES + 64);
    let mut unit = 0u32;
    while code.len() < FUNCTION_BYTES {
        // A block of eight units, left early by a data-dependent branch.
        code.extend([0x02, 0x40]);
        for _ in 0..8 {
            let c = (unit.wrapping_mul(2_654_435_761) ^ salt ^ index) & 0xffff;
            let offset = u64::from((unit * 4) & 0x3ff);
            // $1 = $0 + c; $2 = load($1) * $2 + $3; store($1, $2); $3 = $3 ^ $2
            code.extend([0x20, 0x00, 0x41]);
            code.extend(sleb(i64::from(c)));
            code.extend([0x6a, 0x22, 0x01, 0x28, 0x02]);
            code.extend(leb(offset));
            code.extend([0x20, 0x02, 0x6c, 0x20, 0x03, 0x6a, 0x21, 0x02]);
            code.extend([0x20, 0x01, 0x20, 0x02, 0x36, 0x02]);
            code.extend(leb(offset));
            code.extend([0x20, 0x03, 0x20, 0x02, 0x73, 0x21, 0x03]);
            if unit.is_multiple_of(5) && index > 3 {
                // $2 = f(index - 1)($2)
                code.extend([0x20, 0x02, 0x10]);
                code.extend(leb(u64::from(index - 1)));
                code.extend([0x21, 0x02]);
            }
            // br_if 0 when $2 < $0
            code.extend([0x20, 0x02, 0x20, 0x00, 0x49, 0x0d, 0x00]);
            unit += 1;
        }
        code.push(0x0b);
    }
    code.extend([0x20, 0x02, 0x20, 0x03, 0x6a, 0x0b]);
    body(&code, &[(3, 0x7f)])
}

fn section(out: &mut Vec<u8>, id: u8, content: &[u8]) {
    out.push(id);
    out.extend(leb(content.len() as u64));
    out.extend(content);
}

fn leb(mut value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

fn sleb(mut value: i64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        let done = (value == 0 && byte & 0x40 == 0) || (value == -1 && byte & 0x40 != 0);
        if done {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}
