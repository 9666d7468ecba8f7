//! Fuzz target `routing`: what cluster routing reads from a request and its body
//! (`httpserver::fuzzing::routing`).
fn main() {
    afl::fuzz!(|data: &[u8]| httpserver::fuzzing::routing(data));
}
