//! The fixtures ignore variables that would redirect git elsewhere. This file holds one test
//! because it changes its own process environment, which other tests in the same binary would
//! see.

use testgit::SourceRepo;

#[test]
fn fixtures_ignore_redirecting_git_variables() {
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let bogus = elsewhere.path().join("not-a-repository");
    // SAFETY: this test binary runs this single test, so no other thread reads the environment.
    unsafe {
        std::env::set_var("GIT_DIR", &bogus);
        std::env::set_var("GIT_WORK_TREE", elsewhere.path());
        std::env::set_var("GIT_INDEX_FILE", elsewhere.path().join("index"));
    }
    let repo = SourceRepo::with_files(&[("a.txt", b"one\n")]);
    assert_eq!(repo.git(&["show", "HEAD:a.txt"]), "one");
    assert!(
        repo.path().join(".git").is_dir(),
        "the repository is where the fixture says"
    );
    assert!(!bogus.exists(), "nothing was written where GIT_DIR pointed");
    assert!(
        !elsewhere.path().join("index").exists(),
        "GIT_INDEX_FILE was not followed"
    );
}
