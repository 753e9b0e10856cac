//! Random ids, one way for every program: sidecar-exec's run ids, sidecarctl's run names and run tokens.

use std::io::Read;

/// `bytes` random bytes from the kernel (`/dev/urandom`, which never blocks once the system has booted), as
/// lowercase hex: two digits a byte.
pub fn random_hex(bytes: usize) -> std::io::Result<String> {
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|byte| format!("{byte:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_two_lowercase_hex_digits_a_byte_and_differ() {
        let (a, b) = (random_hex(16).unwrap(), random_hex(16).unwrap());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{a}");
        assert_ne!(a, b);
        assert_eq!(random_hex(0).unwrap(), "");
    }
}
