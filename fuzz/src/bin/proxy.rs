//! Fuzz target `proxy`: PROXY protocol v1/v2 headers, `X-Forwarded-For` and the trusted-proxy
//! setting (`httpserver::fuzzing::proxy`).
fn main() {
    afl::fuzz!(|data: &[u8]| httpserver::fuzzing::proxy(data));
}
