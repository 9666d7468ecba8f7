//! Prints the outline of files: `cargo run -p symbols --example outline -- FILE...`.

fn main() {
    let mut extractor = symbols::Extractor::new();
    for path in std::env::args().skip(1) {
        let Some(grammar) = symbols::Grammar::for_path(&path) else {
            println!("{path}: no grammar");
            continue;
        };
        let source = match std::fs::read(&path) {
            Ok(source) => source,
            Err(error) => {
                println!("{path}: {error}");
                continue;
            }
        };
        match extractor.extract(grammar, &source) {
            Ok(symbols) => {
                println!("{path}:");
                for (i, s) in symbols.iter().enumerate() {
                    println!(
                        "{i:>3} {:<9} {:<12} {}-{} name@{} parent={:?} | {}",
                        s.kind.as_str(),
                        s.name,
                        s.start_line,
                        s.end_line,
                        s.line,
                        s.parent,
                        s.signature
                    );
                }
            }
            Err(error) => println!("{path}: {error}"),
        }
    }
}
