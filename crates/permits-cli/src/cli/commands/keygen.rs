//! `permitc keygen`: an Ed25519 key pair for signing tables (spec §5a).

use super::*;

pub(in crate::cli) fn keygen(output: &Path) -> u8 {
    let public = {
        let mut name = output.as_os_str().to_owned();
        name.push(".pub");
        PathBuf::from(name)
    };
    if output == Path::new("-") {
        errln!(
            "error: `-o -` would write the secret key to stdout, and a secret key is never written there: give \
             `-o FILE` (the public key goes to `FILE.pub`)"
        );
        return 2;
    }
    // Neither file may exist: the secret key, or the public key beside another secret key.
    for path in [output, public.as_path()] {
        if path.exists() {
            errln!("error: `{}` exists: a key is never overwritten", path.display());
            return 2;
        }
    }
    let mut seed = [0u8; 32];
    if let Err(e) = getrandom::fill(&mut seed) {
        errln!("error: no randomness for a key: {e}");
        return 2;
    }
    let secret = crate::table::hex(&seed);
    let Ok(key) = crate::runtime::signing::public_key_of(&secret) else {
        errln!("error: cannot derive the public key");
        return 2;
    };
    let written = (|| {
        use std::io::Write as _;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut f = options.open(output)?;
        f.write_all(format!("{secret}\n").as_bytes())?;
        f.sync_all()?;
        // Created new as well: a public key written meanwhile is not overwritten either, and the secret
        // key just written goes with the pair.
        let public_written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&public)
            .and_then(|mut f| f.write_all(format!("{key}\n").as_bytes()));
        if public_written.is_err() {
            let _ = std::fs::remove_file(output);
        }
        public_written
    })();
    match written {
        Ok(()) => {
            errln!(
                "wrote `{}` (secret key: keep it out of the agent's reach) and `{}`",
                output.display(),
                public.display()
            );
            outln!("{key}");
            0
        }
        Err(e) => {
            errln!("error: cannot write the key: {e}");
            2
        }
    }
}
