//! Syntax: loading a package from disk and turning each file into a syntax tree (spec §1).
//!
//! [`load_package`] reads a folder recursively (or one file) in sorted relative-path order, keeps every
//! file as a named source for diagnostics, and parses each with the pest grammar in
//! `grammar/permits.pest`. The pairs-to-tree functions live in `parse.rs`, one per node. Parsing never
//! stops at the first bad file: every file is parsed and all diagnostics are returned.

pub mod ast;
mod parse;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use ast::{FileId, Span};
/// Every reserved word (spec §1): no declaration may be named one.
pub use parse::RESERVED;

use crate::diagnostics::{Code, Diagnostic};

/// One source file of a package.
#[derive(Clone, Debug)]
pub struct Source {
    /// The path relative to the package root with `/` separators (for a one-file package, the file name).
    pub name: String,
    /// The file's bytes as read, for `source_digest`.
    pub bytes: Vec<u8>,
    /// The text (without a UTF-8 byte-order mark); empty when the file is not UTF-8.
    pub text: Arc<str>,
    /// Byte offsets where each line starts, for line numbers (shared with the diagnostics' source code,
    /// so that rendering a diagnostic finds its lines by binary search instead of rescanning the text).
    line_starts: Arc<[u32]>,
    /// Whether the text has a `\r` that is not followed by `\n` (miette counts it as a line break, the
    /// line starts do not).
    lone_cr: bool,
}

impl Source {
    /// A source named `name` with the given bytes (a byte-order mark is skipped; invalid UTF-8 gives an
    /// empty text, and the caller reports it).
    pub fn new(name: impl Into<String>, bytes: Vec<u8>) -> Source {
        let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
        let text: Arc<str> = std::str::from_utf8(body).map(Arc::from).unwrap_or_else(|_| Arc::from(""));
        let mut line_starts = vec![0];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(u32::try_from(i + 1).unwrap_or(u32::MAX));
            }
        }
        let lone_cr = text.as_bytes().windows(2).any(|w| w[0] == b'\r' && w[1] != b'\n') || text.ends_with('\r');
        Source { name: name.into(), bytes, text, line_starts: line_starts.into(), lone_cr }
    }

    /// The byte offsets where each line starts (the first is 0), shared.
    pub(crate) fn line_starts(&self) -> &Arc<[u32]> {
        &self.line_starts
    }

    /// Whether the text has a `\r` not followed by `\n`.
    pub(crate) fn has_lone_cr(&self) -> bool {
        self.lone_cr
    }

    /// The 1-based line and column (in characters, for SARIF's `unicodeCodePoints`) of a byte offset.
    pub fn line_col_chars(&self, offset: u32) -> (u32, u32) {
        let (line, _) = self.line_col(offset);
        let start = self.line_starts[(line as usize).saturating_sub(1)] as usize;
        let end = (offset as usize).min(self.text.len());
        let chars = self.text.get(start..end).map(|s| s.chars().count()).unwrap_or(0);
        (line, u32::try_from(chars + 1).unwrap_or(u32::MAX))
    }

    /// The 1-based line and column (in bytes) of a byte offset.
    pub fn line_col(&self, offset: u32) -> (u32, u32) {
        let line = self.line_starts.partition_point(|&s| s <= offset).max(1);
        let start = self.line_starts[line - 1];
        (u32::try_from(line).unwrap_or(u32::MAX), offset - start + 1)
    }
}

/// All the sources of one package; a [`FileId`] indexes them.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// The package root as given on the command line (for messages).
    pub root: PathBuf,
    files: Vec<Source>,
}

impl Sources {
    /// Adds a source and returns its id.
    pub fn add(&mut self, source: Source) -> FileId {
        self.files.push(source);
        FileId(u32::try_from(self.files.len() - 1).unwrap_or(u32::MAX))
    }

    /// The source of an id.
    ///
    /// # Panics
    /// Never for an id this value handed out.
    pub fn get(&self, id: FileId) -> &Source {
        &self.files[id.0 as usize]
    }

    /// The name of a file (relative path).
    pub fn name(&self, id: FileId) -> &str {
        &self.get(id).name
    }

    /// The name to show a person: the path as given on the command line joined with the file's relative
    /// path (`policies/workshop/tools.permits`), so places in several packages are told apart.
    pub fn display_name(&self, id: FileId) -> String {
        let name = self.name(id);
        if self.root.as_os_str().is_empty() {
            name.to_string()
        } else if self.root.is_dir() {
            let root = self.root.to_string_lossy();
            format!("{}/{name}", root.trim_end_matches('/'))
        } else {
            self.root.to_string_lossy().into_owned()
        }
    }

    /// The text of a file, shared.
    pub fn text_arc(&self, id: FileId) -> Arc<str> {
        self.get(id).text.clone()
    }

    /// The text a span covers.
    pub fn slice(&self, span: Span) -> &str {
        self.get(span.file).text.get(span.start as usize..span.end as usize).unwrap_or("")
    }

    /// The 1-based line of a span's start.
    pub fn line(&self, span: Span) -> u32 {
        self.get(span.file).line_col(span.start).0
    }

    /// All sources, in id order (which is sorted path order).
    pub fn iter(&self) -> impl Iterator<Item = (FileId, &Source)> {
        self.files.iter().enumerate().map(|(i, s)| (FileId(i as u32), s))
    }

    /// How many files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// SHA-256 (hex) over each source's relative path and bytes, each length-prefixed (8 bytes, big
    /// endian), in sorted path order (spec §4 `source_digest`).
    pub fn digest(&self) -> String {
        use sha2::Digest;
        // Fed to the hasher piece by piece rather than copied into one buffer first (same bytes).
        let mut hasher = sha2::Sha256::new();
        for s in &self.files {
            hasher.update((s.name.len() as u64).to_be_bytes());
            hasher.update(s.name.as_bytes());
            hasher.update((s.bytes.len() as u64).to_be_bytes());
            hasher.update(&s.bytes);
        }
        crate::table::hex(&hasher.finalize())
    }
}

/// A package as read: its sources, its syntax tree (files that failed to parse are absent) and every
/// diagnostic of loading and parsing.
#[derive(Debug)]
pub struct Loaded {
    /// The sources, for diagnostics.
    pub sources: Sources,
    /// The syntax tree of the files that parsed.
    pub package: ast::Package,
    /// Loading and syntax diagnostics.
    pub diagnostics: Vec<Diagnostic>,
}

/// Errors that stop loading before any file is read: the path itself is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The path does not exist or cannot be read.
    #[error("cannot read `{path}`: {source}")]
    Io {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

impl ReadError {
    /// The diagnostic code of a load error: `permits::load::io`.
    pub fn code(&self) -> Code {
        match self {
            ReadError::Io { .. } => Code::LoadIo,
        }
    }
}

/// Reads a package: `path` is a folder (every `*.permits` file under it, see [`package_files`]) or one
/// file. Parses every file.
///
/// Errors: [`ReadError::Io`] when the path or a folder in it cannot be read. Everything about the files'
/// content (no `.permits` files, invalid UTF-8, NUL bytes, syntax) is a diagnostic in [`Loaded`].
pub fn load_package(path: &Path) -> Result<Loaded, ReadError> {
    let io = |source| ReadError::Io { path: path.display().to_string(), source };
    let meta = std::fs::metadata(path).map_err(io)?;
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    if meta.is_dir() {
        found = package_files(path)?;
    } else {
        let name =
            path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string());
        found.push((name, path.to_path_buf()));
    }
    let mut sources = Sources { root: path.to_path_buf(), files: Vec::new() };
    for (name, file) in found {
        let bytes =
            std::fs::read(&file).map_err(|source| ReadError::Io { path: file.display().to_string(), source })?;
        sources.add(Source::new(name, bytes));
    }
    Ok(parse_sources(sources))
}

/// Parses sources already in memory (used by [`load_package`] and by tests).
pub fn parse_sources(sources: Sources) -> Loaded {
    let mut diagnostics = Vec::new();
    let mut package = ast::Package::default();
    if sources.is_empty() {
        diagnostics.push(
            Diagnostic::new(Code::LoadEmpty, format!("no `.permits` files in `{}`", sources.root.display()))
                .help("a package is a folder of `.permits` files, read recursively, or one file"),
        );
    }
    // Files are parsed independently: with several files and enough text to be worth a thread, each of a
    // few threads takes a contiguous run of files, and the results are joined in file order, so the
    // package and the diagnostics are the same as parsing one file after another.
    let files: Vec<(FileId, &Source)> = sources.iter().collect();
    let total: usize = files.iter().map(|(_, s)| s.bytes.len()).sum();
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(files.len());
    let results: Vec<(Option<ast::File>, Vec<Diagnostic>)> = if threads > 1 && total >= PARALLEL_BYTES {
        let chunk = files.len().div_ceil(threads);
        let sources = &sources;
        std::thread::scope(|scope| {
            // Each thread gets the main thread's usual stack (8 MiB), so a file parses the same on any
            // thread; a run whose thread cannot be started is parsed here.
            let spawned: Vec<_> = files
                .chunks(chunk)
                .map(|run| {
                    let thread = std::thread::Builder::new().stack_size(PARSE_STACK_BYTES);
                    (run, thread.spawn_scoped(scope, move || parse_run(sources, run)))
                })
                .collect();
            let mut results = Vec::with_capacity(files.len());
            for (run, handle) in spawned {
                match handle {
                    // A thread that panicked (a bug) is re-raised here, as it would be without threads.
                    Ok(h) => results.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))),
                    Err(_) => results.extend(parse_run(sources, run)),
                }
            }
            results
        })
    } else {
        parse_run(&sources, &files)
    };
    for (file, mut diags) in results {
        diagnostics.append(&mut diags);
        if let Some(file) = file {
            package.files.push(file);
        }
    }
    Loaded { sources, package, diagnostics }
}

/// Below this many bytes in all, a package is parsed on the calling thread: starting threads would cost
/// more than it saves.
const PARALLEL_BYTES: usize = 256 * 1024;

/// The stack of a parsing thread: what the main thread has on Linux.
const PARSE_STACK_BYTES: usize = 8 << 20;

/// Checks and parses a run of sources, in order.
fn parse_run(sources: &Sources, run: &[(FileId, &Source)]) -> Vec<(Option<ast::File>, Vec<Diagnostic>)> {
    run.iter().map(|&(id, source)| parse_one(sources, id, source)).collect()
}

/// Checks and parses one source: its syntax tree (`None` when it is unusable) and its diagnostics.
fn parse_one(sources: &Sources, id: FileId, source: &Source) -> (Option<ast::File>, Vec<Diagnostic>) {
    let body = source.bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&source.bytes);
    if let Err(e) = std::str::from_utf8(body) {
        let diag = Diagnostic::new(
            Code::LoadUtf8,
            format!("`{}` is not valid UTF-8 (byte {})", sources.display_name(id), e.valid_up_to()),
        )
        .help("save the file as UTF-8");
        return (None, vec![diag]);
    }
    if let Some(pos) = source.text.find('\0') {
        let at = u32::try_from(pos).unwrap_or(u32::MAX);
        let diag = Diagnostic::new(Code::SyntaxNul, "a NUL byte in a source file")
            .at(Span { file: id, start: at, end: at.saturating_add(1) }, "here")
            .help("remove the NUL byte; `.permits` files are text");
        return (None, vec![diag]);
    }
    parse::parse_file(id, &source.text)
}

/// Every `.permits` file of a package folder as `(relative name, path)`, sorted by relative name: read
/// recursively, hidden entries skipped. A file reachable under several names (through symlinks) is read
/// once, under its smallest relative name, so the result never depends on the file system's order; a
/// symlink back to an enclosing folder is not followed (a loop).
///
/// Errors: [`ReadError::Io`] when a folder cannot be read.
pub fn package_files(root: &Path) -> Result<Vec<(String, PathBuf)>, ReadError> {
    let mut found: Vec<(String, PathBuf, PathBuf)> = Vec::new();
    let mut stack: Vec<(PathBuf, Vec<PathBuf>)> = vec![(root.to_path_buf(), Vec::new())];
    while let Some((dir, mut ancestors)) = stack.pop() {
        let canonical = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
        if ancestors.contains(&canonical) {
            continue; // a symlink back to an enclosing folder
        }
        ancestors.push(canonical);
        let entries =
            std::fs::read_dir(&dir).map_err(|source| ReadError::Io { path: dir.display().to_string(), source })?;
        for entry in entries {
            let entry = entry.map_err(|source| ReadError::Io { path: dir.display().to_string(), source })?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                stack.push((path, ancestors.clone()));
            } else if path.extension().is_some_and(|e| e == "permits") {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                let rel = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
                found.push((rel, path, canonical));
            }
        }
    }
    found.sort();
    let mut seen = std::collections::HashSet::new();
    Ok(found.into_iter().filter(|(_, _, c)| seen.insert(c.clone())).map(|(rel, path, _)| (rel, path)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A package large enough to be parsed on threads gives the same files, in the same order, and the same
    /// diagnostics, as parsing its files one after another: here a generated package cut into files of 400
    /// lines (so some cut a declaration and fail to parse), one file that is not UTF-8 and one with a NUL.
    #[test]
    fn files_parsed_on_threads_give_what_one_after_another_gives() {
        let text = permits_testkit::generate::generate(&permits_testkit::generate::Config::sized(3000));
        let lines: Vec<&str> = text.lines().collect();
        let mut sources = Sources::default();
        for (i, chunk) in lines.chunks(400).enumerate() {
            sources.add(Source::new(format!("part{i:02}.permits"), (chunk.join("\n") + "\n").into_bytes()));
            if i == 2 {
                sources.add(Source::new("latin1.permits", b"role R\xe9viewer\n".to_vec()));
            }
            if i == 4 {
                sources.add(Source::new("nul.permits", b"role A\0\n".to_vec()));
            }
        }
        let total: usize = sources.iter().map(|(_, s)| s.bytes.len()).sum();
        assert!(total >= PARALLEL_BYTES && sources.len() > 2, "{total} bytes in {} files", sources.len());
        let files: Vec<(FileId, &Source)> = sources.iter().collect();
        let one_by_one = parse_run(&sources, &files);
        let (mut expected_files, mut expected_diags) = (Vec::new(), Vec::new());
        for (file, diags) in one_by_one {
            expected_diags.extend(diags);
            expected_files.extend(file);
        }
        assert!(!expected_diags.is_empty() && expected_files.len() + 3 <= files.len());
        let loaded = parse_sources(sources.clone());
        assert_eq!(format!("{:?}", loaded.package.files), format!("{expected_files:?}"));
        assert_eq!(format!("{:?}", loaded.diagnostics), format!("{expected_diags:?}"));
    }
}
