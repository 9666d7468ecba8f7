//! Fuzz target `search_query`: a code search's query and filters, planned and searched
//! (`search::fuzzing::search_query`).
fn main() {
    afl::fuzz!(|data: &[u8]| search::fuzzing::search_query(data));
}
