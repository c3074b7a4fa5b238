//! `permitc fmt`.

use super::*;

pub(in crate::cli) fn fmt(paths: &[PathBuf], check: bool) -> u8 {
    let mut worst = 0u8;
    let mut changed = 0usize;
    for path in paths {
        let files = if path.is_dir() {
            match syntax::package_files(path) {
                Ok(files) => files.into_iter().map(|(_, p)| p).collect(),
                Err(e) => {
                    errln!("error: {e}");
                    worst = 2;
                    continue;
                }
            }
        } else {
            vec![path.clone()]
        };
        for file in files {
            let bytes = match std::fs::read(&file) {
                Ok(b) => b,
                Err(e) => {
                    errln!("error: cannot read `{}`: {e}", file.display());
                    worst = 2;
                    continue;
                }
            };
            let name = file.display().to_string();
            let Ok(text) = std::str::from_utf8(&bytes) else {
                errln!("error: `{name}` is not valid UTF-8; not formatted");
                worst = worst.max(1);
                continue;
            };
            match crate::fmt::format_file(text) {
                Err(diags) => {
                    let mut sources = Sources::default();
                    sources.add(crate::syntax::Source::new(name.clone(), bytes.clone()));
                    err!("{}", render(&diags, &sources, colour()));
                    errln!("`{name}` does not parse; not formatted");
                    worst = worst.max(1);
                }
                Ok(formatted) if formatted.as_bytes() == bytes.as_slice() => {}
                Ok(formatted) => {
                    changed += 1;
                    if check {
                        outln!("{name}");
                        worst = worst.max(1);
                    } else if let Err(e) = write_atomically(&file, formatted.as_bytes()) {
                        errln!("error: cannot write `{name}`: {e}");
                        worst = 2;
                    } else {
                        outln!("formatted {name}");
                    }
                }
            }
        }
    }
    if check && changed > 0 {
        errln!(
            "{} would be reformatted; run `permitc fmt` on {}",
            plural(changed, "file"),
            if changed == 1 { "it" } else { "them" }
        );
    }
    worst
}
