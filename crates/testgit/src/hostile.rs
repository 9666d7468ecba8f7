//! Hostile inputs shared by the tests (and benchmarks) that prove the server bounds them.

/// The formatting-element bomb of issue 42, as raw HTML: `n` nested unclosed `<b>`s with
/// distinct attributes (so an HTML parser keeps every one) in a paragraph, then `m`
/// paragraphs in each of which the parser would reopen all of them. `(2000, 2000)` is the
/// issue's 44 KB README, which html5ever made 28 MB of HTML from with 920 MB of memory.
pub fn formatting_bomb(n: usize, m: usize) -> String {
    let mut text = String::from("<p>");
    for i in 0..n {
        text.push_str(&format!("<b class=a{i}>"));
    }
    text.push_str("</p>");
    text.push_str(&"<p>x</p>".repeat(m));
    text.push('\n');
    text
}
