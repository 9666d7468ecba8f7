//! Fuzz target `tool_args`: a tool call's arguments as JSON and as a query string
//! (`tools::fuzzing::tool_arguments`).
fn main() {
    afl::fuzz!(|data: &[u8]| tools::fuzzing::tool_arguments(data));
}
