//! Fuzz target `server_plugin_tables`: a server plugin's tables, `REQUIRES` and hook results
//! as the host validates them (`tools::fuzzing::server_plugin_tables`).
fn main() {
    afl::fuzz!(|data: &[u8]| tools::fuzzing::server_plugin_tables(data));
}
