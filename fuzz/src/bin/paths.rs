//! Fuzz target `paths`: the site's repository paths against the website's URLs
//! (`httpserver::fuzzing::paths`), repository names and paths (`gitstore::fuzzing::names`).
fn main() {
    afl::fuzz!(|data: &[u8]| {
        httpserver::fuzzing::paths(data);
        gitstore::fuzzing::names(data);
    });
}
