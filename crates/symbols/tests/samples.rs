//! Outlines of the committed samples (`tests/samples/`), one per grammar, against
//! expectations checked by hand: kind, name, line range and parent of every definition.

use symbols::{Extractor, Grammar};

fn outline(file: &str) -> Vec<String> {
    let path = format!("{}/tests/samples/{file}", env!("CARGO_MANIFEST_DIR"));
    let source = std::fs::read(&path).unwrap();
    let grammar = Grammar::for_path(file).unwrap();
    let symbols = Extractor::new().extract(grammar, &source).unwrap();
    symbols
        .iter()
        .map(|s| {
            let parent = s.parent.map_or("-", |p| symbols[p as usize].name.as_str());
            format!(
                "{} {} {}-{} {parent}",
                s.kind.as_str(),
                s.name,
                s.start_line,
                s.end_line
            )
        })
        .collect()
}

#[test]
fn rust_outline() {
    assert_eq!(
        outline("sample.rs"),
        [
            "constant LIMIT 2-2 -",
            "class Point 4-6 -",
            "class Shape 8-10 -",
            "interface Area 12-14 -",
            "impl Shape 16-20 -",
            "method area 17-19 Shape",
            "impl Wrapper 22-26 -",
            "method new 23-25 Wrapper",
            "module inner 28-30 -",
            "function helper 29-29 inner",
            "macro square 32-36 -",
            "function main 38-41 -",
        ]
    );
}

#[test]
fn go_outline() {
    assert_eq!(
        outline("sample.go"),
        [
            "constant Limit 3-3 -",
            "type Point 5-7 -",
            "type Area 9-11 -",
            "method Area 14-16 -",
            "function New 18-20 -",
        ]
    );
}

#[test]
fn python_outline() {
    assert_eq!(
        outline("sample.py"),
        [
            "constant LIMIT 1-1 -",
            "class Point 4-9 -",
            "method __init__ 5-6 Point",
            "method area 8-9 Point",
            "function new 12-15 -",
            "function inner 13-14 new",
        ]
    );
}

#[test]
fn javascript_outline() {
    // The grammar's query leaves constructors out on purpose.
    assert_eq!(
        outline("sample.js"),
        [
            "class Point 1-9 -",
            "method area 6-8 Point",
            "function make 11-13 -",
            "function double 15-15 -",
        ]
    );
}

#[test]
fn typescript_outline() {
    assert_eq!(
        outline("sample.ts"),
        [
            "interface Shape 1-3 -",
            "method area 2-2 Shape",
            "class Base 5-7 -",
            "method name 6-6 Base",
            "class Point 9-16 -",
            "method area 10-12 Point",
            "method name 13-15 Point",
            "function make 18-20 -",
            "module Geometry 22-24 -",
        ]
    );
}

#[test]
fn java_outline() {
    assert_eq!(
        outline("sample.java"),
        [
            "interface Shape 3-5 -",
            "method area 4-4 Shape",
            "class Point 7-17 -",
            "method Point 10-12 Point",
            "method area 14-16 Point",
            "class Color 19-19 -",
        ]
    );
}

#[test]
fn c_outline() {
    // A prototype is a definition of one line; the definition spans its body.
    assert_eq!(
        outline("sample.c"),
        [
            "class point 3-5 -",
            "type point_t 7-7 -",
            "function area 9-9 -",
            "function area 11-14 -",
            "function name 16-19 -",
            "type color 21-21 -",
        ]
    );
}

#[test]
fn cpp_outline() {
    assert_eq!(
        outline("sample.cpp"),
        [
            "module geo 1-19 -",
            "class Point 3-9 geo",
            "method area 5-7 Point",
            "method perimeter 8-8 Point",
            "method perimeter 11-13 geo",
            "class Size 15-17 geo",
            "function main 21-24 -",
        ]
    );
}

#[test]
fn signatures_are_the_trimmed_name_line() {
    let source = b"class A:\n    def f(self, x):  \n        return x\n";
    let symbols = Extractor::new().extract(Grammar::Python, source).unwrap();
    assert_eq!(symbols[1].signature, "def f(self, x):");
}

#[test]
fn a_long_line_is_cut_on_a_character_boundary() {
    let source = format!("fn f() {{ let s = \"{}\"; }}\n", "é".repeat(300));
    let symbols = Extractor::new()
        .extract(Grammar::Rust, source.as_bytes())
        .unwrap();
    assert!(symbols[0].signature.len() <= symbols::MAX_SIGNATURE_BYTES);
    assert!(symbols[0].signature.starts_with("fn f()"));
}
