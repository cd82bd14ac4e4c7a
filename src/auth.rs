//! The shared-secret token: read from a file (never from the command line,
//! where `ps` would show it), compared in constant time.
//!
//! Who presents it: feeds and order clients (first line `AUTH <token>`;
//! the connection kit's `net::AuthGate` checks it with [`check_line`]),
//! subscribers (RESP `AUTH <token>` or `AUTH default <token>`, as in
//! Redis), the admin endpoint (`Authorization: Bearer <token>`). A wrong token gets one error
//! and the connection is closed; a connection that has not authenticated
//! within the timeout is closed too.

use std::path::Path;

use subtle::ConstantTimeEq;

/// The secret. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(Box<[u8]>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl serde::Serialize for Token {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("<redacted>")
    }
}

/// Why a token file was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file cannot be read.
    #[error("cannot read token file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is empty (after trimming the final newline) or holds whitespace.
    #[error("token file {path} must hold one token without spaces")]
    Malformed {
        /// The file.
        path: String,
    },
}

impl Token {
    /// A token from its bytes (tests, tools).
    pub fn new(bytes: &[u8]) -> Token {
        Token(bytes.into())
    }

    /// Reads the token from a file; a final `\n` or `\r\n` is ignored.
    ///
    /// # Errors
    /// An unreadable file, or one that is empty or holds whitespace.
    pub fn from_file(path: &Path) -> Result<Token, TokenError> {
        let shown = path.display().to_string();
        let raw = std::fs::read(path).map_err(|source| TokenError::Read {
            path: shown.clone(),
            source,
        })?;
        let t = raw.strip_suffix(b"\n").unwrap_or(&raw);
        let t = t.strip_suffix(b"\r").unwrap_or(t);
        if t.is_empty() || t.iter().any(|b| b.is_ascii_whitespace()) {
            return Err(TokenError::Malformed { path: shown });
        }
        Ok(Token(t.into()))
    }

    /// The secret itself, for a client the engine runs on its own behalf
    /// (the admin endpoint replaying orders). Never log it.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// True when `candidate` is the token. Constant time in the token's
    /// content (only the length can be learnt).
    pub fn verify(&self, candidate: &[u8]) -> bool {
        self.0.len() == candidate.len() && bool::from(self.0.ct_eq(candidate))
    }
}

/// The line the order port sends when the first line passes (`AUTH <token>`).
pub const LINE_OK: &[u8] = b"OK\n";
/// The line sent before closing a connection whose `AUTH` token is wrong.
pub(crate) const LINE_INVALID: &[u8] = b"ERR invalid token\n";
/// The line sent before closing a connection whose first line is not `AUTH`.
pub(crate) const LINE_REQUIRED: &[u8] = b"ERR authentication required: send AUTH <token> first\n";
/// The line sent before closing a connection that sent no `AUTH` in time.
pub(crate) const LINE_TIMEOUT: &[u8] = b"ERR authentication timeout\n";

/// What the first line of a line protocol says, when a token is required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineAuth {
    /// `AUTH <token>` with the right token.
    Passed,
    /// `AUTH <something else>`: answer [`LINE_INVALID`] and close.
    Wrong,
    /// Not an `AUTH` line: answer [`LINE_REQUIRED`] and close.
    Missing,
}

impl LineAuth {
    /// The error line to send before closing (`None` when it passed).
    pub(crate) fn refusal(self) -> Option<&'static [u8]> {
        match self {
            LineAuth::Passed => None,
            LineAuth::Wrong => Some(LINE_INVALID),
            LineAuth::Missing => Some(LINE_REQUIRED),
        }
    }
}

/// Checks a first line (without its `\n`; a final `\r` is ignored) against
/// the token: `AUTH <token>`, the keyword in any case, one space.
pub(crate) fn check_line(token: &Token, line: &[u8]) -> LineAuth {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match line.split_at_checked(5) {
        Some((kw, t)) if kw.eq_ignore_ascii_case(b"AUTH ") => {
            if token.verify(t) {
                LineAuth::Passed
            } else {
                LineAuth::Wrong
            }
        }
        _ => LineAuth::Missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_token_verifies_and_never_prints() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, "s3cret\n").unwrap();
        let t = Token::from_file(&p).unwrap();
        assert!(t.verify(b"s3cret"));
        assert!(!t.verify(b"s3cre"));
        assert!(!t.verify(b"s3cret\n"));
        assert!(!format!("{t:?}").contains("s3cret"));
        std::fs::write(&p, "\n").unwrap();
        assert!(matches!(
            Token::from_file(&p),
            Err(TokenError::Malformed { .. })
        ));
        std::fs::write(&p, "two words").unwrap();
        assert!(Token::from_file(&p).is_err());
    }

    #[test]
    fn first_line_passes_only_with_the_token() {
        let t = Token::new(b"s3cret");
        assert_eq!(check_line(&t, b"AUTH s3cret"), LineAuth::Passed);
        assert_eq!(check_line(&t, b"auth s3cret\r"), LineAuth::Passed);
        assert_eq!(check_line(&t, b"AUTH s3cre"), LineAuth::Wrong);
        assert_eq!(check_line(&t, b"AUTH  s3cret"), LineAuth::Wrong);
        assert_eq!(check_line(&t, b"NEW o-1 X BUY 1"), LineAuth::Missing);
        assert_eq!(check_line(&t, b"AUTH"), LineAuth::Missing);
        assert_eq!(LineAuth::Passed.refusal(), None);
    }
}
