//! Fuzz target `cursor`: a `log` page's signed cursor (`gitstore::fuzzing::log_cursor`) and
//! the page cursors of code, commit and diff searches (`search::fuzzing::cursors`).
fn main() {
    afl::fuzz!(|data: &[u8]| {
        gitstore::fuzzing::log_cursor(data);
        search::fuzzing::cursors(data);
    });
}
