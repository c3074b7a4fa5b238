//! `permitc compile`.

use super::*;

pub(in crate::cli) fn compile_cmd(
    path: &Path,
    output: &Path,
    format: Format,
    deny_warnings: bool,
    signing: Option<(&Path, u64)>,
) -> u8 {
    let out = match crate::compile::compile_package(path) {
        Ok(out) => out,
        Err(e) => return io_error(&e, format),
    };
    let (errors, warnings) = count(&out);
    match format {
        Format::Human => err!("{}", render(&out.diagnostics, &out.sources, colour())),
        Format::Json => print_json(&CompileJson {
            path: path.display().to_string(),
            errors,
            warnings,
            diagnostics: DiagnosticJson::all(&out),
        }),
    }
    let table = match out.table {
        Some(t) if errors == 0 && !(deny_warnings && warnings > 0) => t,
        _ => {
            if format == Format::Human {
                errln!("{}; no table written", summary(path, &Output { table: None, ..out }));
            }
            return 1;
        }
    };
    let bytes = table.to_pretty_json();
    if output == Path::new("-") && signing.is_none() {
        out!("{bytes}");
        return 0;
    }
    let signature = match signing {
        None => None,
        Some((key_file, serial)) => {
            if output == Path::new("-") {
                errln!("error: `--sign` writes `OUTPUT.sig` beside the table: give `-o FILE`, not `-`");
                return 2;
            }
            let secret = match std::fs::read_to_string(key_file) {
                Ok(s) => s,
                Err(e) => {
                    errln!("error: cannot read the secret key `{}`: {e}", key_file.display());
                    return 2;
                }
            };
            match crate::runtime::signing::sign(&table.header.table_digest, serial, &secret) {
                Ok(sig) => Some(sig),
                Err(e) => {
                    errln!("error: `{}`: {e}", key_file.display());
                    return 2;
                }
            }
        }
    };
    if let Err(e) = write_atomically(output, bytes.as_bytes()) {
        errln!("error: cannot write `{}`: {e}", output.display());
        return 2;
    }
    if format == Format::Human {
        errln!("wrote `{}` (table digest {})", output.display(), &table.header.table_digest);
    }
    if let Some(sig) = signature {
        let sig_path = signature_path(output);
        let text = serde_json::to_string_pretty(&sig).unwrap_or_default() + "\n";
        if let Err(e) = write_atomically(&sig_path, text.as_bytes()) {
            errln!("error: cannot write `{}`: {e}", sig_path.display());
            return 2;
        }
        if format == Format::Human {
            errln!("wrote `{}` (serial {}, key {})", sig_path.display(), sig.serial, sig.key);
        }
    }
    0
}

/// Where a table's signature lives: `table.json` → `table.json.sig`.
pub(in crate::cli) fn signature_path(table: &Path) -> PathBuf {
    let mut name = table.as_os_str().to_owned();
    name.push(crate::runtime::signing::SIGNATURE_SUFFIX);
    PathBuf::from(name)
}
