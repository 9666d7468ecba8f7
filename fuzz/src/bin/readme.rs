//! Fuzz target `readme`: a repository's README rendered and sanitised
//! (`website::fuzzing::readme`).
fn main() {
    afl::fuzz!(|data: &[u8]| website::fuzzing::readme(data));
}
