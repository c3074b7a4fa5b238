//! The pre-commit hook in `examples/ci/` refuses a commit that widens authority and lets a narrowing
//! through. It runs the real hook with the real `permitc` on a throwaway git repository.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.email=ci@example.invalid", "-c", "user.name=ci"])
        .args(args)
        .status()
        .expect("git runs")
        .success();
    assert!(ok, "git {args:?}");
}

fn repo(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("permits-hook-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let pkg = dir.join("policies/workshop");
    std::fs::create_dir_all(&pkg).expect("temp repo");
    let src = crate::root().join("policies/workshop");
    for entry in std::fs::read_dir(src).expect("workshop") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), pkg.join(entry.file_name())).expect("copy");
    }
    git(&dir, &["init", "-q"]);
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-qm", "init"]);
    dir
}

fn edit(dir: &Path, file: &str, from: &str, to: &str) {
    let path = dir.join("policies/workshop").join(file);
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.contains(from), "{from}");
    std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
}

fn hook(dir: &Path) -> (i32, String) {
    let bin = Path::new(env!("CARGO_BIN_EXE_permitc")).parent().expect("bin dir").to_path_buf();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("bash")
        .arg(crate::root().join("examples/ci/pre-commit"))
        .current_dir(dir)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env_remove("PERMITS_ALLOW_WIDEN")
        .output()
        .expect("the hook runs");
    (
        out.status.code().unwrap_or(-1),
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
    )
}

#[test]
fn the_hook_refuses_a_widening_and_accepts_a_narrowing() {
    let dir = repo("widen");
    edit(&dir, "agents.permits", "never [ScrapRepair]", "never [ScrapRepair]\n        alone [PartsFor, SetPrice]");
    edit(&dir, "agents.permits", "route SetPrice to person Noor", "");
    edit(
        &dir,
        "tests.permits",
        "SetPrice is propose\n    expect Estimator.EstimateRepair.ScrapRepair",
        "SetPrice is alone\n    expect Estimator.EstimateRepair.ScrapRepair",
    );
    edit(&dir, "tests.permits", "PriceFleetRepair.SetPrice is propose", "PriceFleetRepair.SetPrice is alone");
    git(&dir, &["add", "-A"]);
    let (code, out) = hook(&dir);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("WIDENING  (Estimator, EstimateRepair, SetPrice)"), "{out}");
    assert!(out.contains("this commit widens authority in policies/workshop"), "{out}");

    let dir2 = repo("narrow");
    edit(&dir2, "agents.permits", "alone [NoteRepair]", "propose [NoteRepair]");
    edit(&dir2, "tests.permits", "NoteRepair is alone", "NoteRepair is propose");
    git(&dir2, &["add", "-A"]);
    let (code, out) = hook(&dir2);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("narrowing (Estimator, EstimateRepair, NoteRepair)"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
}
