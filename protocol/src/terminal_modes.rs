//! `TtyRequest.modes` (docs/exec-server.md, "Terminal modes"): the client's terminal modes by name, as OpenSSH's
//! `pty-req` carries them (RFC 4254 §8 encoded terminal modes, and RFC 8160's IUTF8), read from the local terminal and
//! laid over the remote pty's.
//!
//! *Names, not bitmasks:* a flag's bit and a control character's slot differ between systems (Linux and the BSDs
//! disagree on both), so the wire names them as `stty` does (`erase`, `icrnl`), as RFC 4254 gives each an opcode.
//! *The set is OpenSSH's*, less what Linux has not (VDSUSP, VSTATUS, VFLUSH): the modes a program notices. The others
//! (`brkint`, `min`, `time`, …) stay as the remote pty has them.
//!
//! *Reading the wire:* a name this side does not know is dropped unread (a newer peer may send more); a known name
//! with a wrong value is refused with a message that names it (`tty.modes.chars.erase`).

use std::collections::BTreeMap;

use rustix::termios::{ControlModes, InputModes, LocalModes, OutputModes, SpecialCodeIndex, Termios};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

/// The modes of a terminal: each named entry overrides the remote pty's own; what is not named stays as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct TerminalModes {
    /// Control characters by name ([`CONTROL_CHARS`]): the byte the key sends (127 for `^?`, 8 for `^H`), or
    /// `null` for none (`stty`'s `<undef>`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", deserialize_with = "known_chars")]
    pub chars: BTreeMap<String, Option<u8>>,
    /// Flags by name ([`FLAGS`]): on or off. `cs7` and `cs8` are the character size (at most one of them on).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty", deserialize_with = "known_flags")]
    pub flags: BTreeMap<String, bool>,
    /// The input speed, in baud (a pty keeps it, and `stty` shows it).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "ispeed")]
    pub ispeed: Option<u32>,
    /// The output speed, in baud.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "ospeed")]
    pub ospeed: Option<u32>,
}

/// The control characters the wire names, each with its slot.
pub const CONTROL_CHARS: &[(&str, SpecialCodeIndex)] = &[
    ("intr", SpecialCodeIndex::VINTR),
    ("quit", SpecialCodeIndex::VQUIT),
    ("erase", SpecialCodeIndex::VERASE),
    ("kill", SpecialCodeIndex::VKILL),
    ("eof", SpecialCodeIndex::VEOF),
    ("eol", SpecialCodeIndex::VEOL),
    ("eol2", SpecialCodeIndex::VEOL2),
    ("swtch", SpecialCodeIndex::VSWTC),
    ("start", SpecialCodeIndex::VSTART),
    ("stop", SpecialCodeIndex::VSTOP),
    ("susp", SpecialCodeIndex::VSUSP),
    ("rprnt", SpecialCodeIndex::VREPRINT),
    ("werase", SpecialCodeIndex::VWERASE),
    ("lnext", SpecialCodeIndex::VLNEXT),
    ("discard", SpecialCodeIndex::VDISCARD),
];

/// Where a flag lives in a termios.
#[derive(Debug, Clone, Copy)]
pub enum Flag {
    Input(InputModes),
    Output(OutputModes),
    Local(LocalModes),
    Control(ControlModes),
    /// A value of the character size field (CSIZE): on sets it, off leaves the size to the other `cs` name.
    CharSize(ControlModes),
}

/// The flags the wire names, each with where it lives.
pub const FLAGS: &[(&str, Flag)] = &[
    ("ignpar", Flag::Input(InputModes::IGNPAR)),
    ("parmrk", Flag::Input(InputModes::PARMRK)),
    ("inpck", Flag::Input(InputModes::INPCK)),
    ("istrip", Flag::Input(InputModes::ISTRIP)),
    ("inlcr", Flag::Input(InputModes::INLCR)),
    ("igncr", Flag::Input(InputModes::IGNCR)),
    ("icrnl", Flag::Input(InputModes::ICRNL)),
    ("iuclc", Flag::Input(InputModes::IUCLC)),
    ("ixon", Flag::Input(InputModes::IXON)),
    ("ixany", Flag::Input(InputModes::IXANY)),
    ("ixoff", Flag::Input(InputModes::IXOFF)),
    ("imaxbel", Flag::Input(InputModes::IMAXBEL)),
    ("iutf8", Flag::Input(InputModes::IUTF8)),
    ("isig", Flag::Local(LocalModes::ISIG)),
    ("icanon", Flag::Local(LocalModes::ICANON)),
    ("xcase", Flag::Local(LocalModes::XCASE)),
    ("echo", Flag::Local(LocalModes::ECHO)),
    ("echoe", Flag::Local(LocalModes::ECHOE)),
    ("echok", Flag::Local(LocalModes::ECHOK)),
    ("echonl", Flag::Local(LocalModes::ECHONL)),
    ("noflsh", Flag::Local(LocalModes::NOFLSH)),
    ("tostop", Flag::Local(LocalModes::TOSTOP)),
    ("iexten", Flag::Local(LocalModes::IEXTEN)),
    ("echoctl", Flag::Local(LocalModes::ECHOCTL)),
    ("echoke", Flag::Local(LocalModes::ECHOKE)),
    ("pendin", Flag::Local(LocalModes::PENDIN)),
    ("opost", Flag::Output(OutputModes::OPOST)),
    ("olcuc", Flag::Output(OutputModes::OLCUC)),
    ("onlcr", Flag::Output(OutputModes::ONLCR)),
    ("ocrnl", Flag::Output(OutputModes::OCRNL)),
    ("onocr", Flag::Output(OutputModes::ONOCR)),
    ("onlret", Flag::Output(OutputModes::ONLRET)),
    ("cs7", Flag::CharSize(ControlModes::CS7)),
    ("cs8", Flag::CharSize(ControlModes::CS8)),
    ("parenb", Flag::Control(ControlModes::PARENB)),
    ("parodd", Flag::Control(ControlModes::PARODD)),
];

/// Linux's `_POSIX_VDISABLE`: the slot value that means "no character".
const DISABLED: u8 = 0;

impl TerminalModes {
    /// Every named mode of `termios` (a speed of 0, "hang up", is left out).
    pub fn of(termios: &Termios) -> Self {
        let chars = CONTROL_CHARS
            .iter()
            .map(|&(name, slot)| {
                let byte = termios.special_codes[slot];
                (name.to_owned(), (byte != DISABLED).then_some(byte))
            })
            .collect();
        let flags = FLAGS.iter().map(|&(name, flag)| (name.to_owned(), flag.is_set(termios))).collect();
        let speed = |speed: u32| (speed != 0).then_some(speed);
        TerminalModes { chars, flags, ispeed: speed(termios.input_speed()), ospeed: speed(termios.output_speed()) }
    }

    /// Lays the named modes over `termios`; what is not named stays. Err: the system refused a speed (the other
    /// modes are set).
    pub fn apply(&self, termios: &mut Termios) -> rustix::io::Result<()> {
        for &(name, slot) in CONTROL_CHARS {
            if let Some(byte) = self.chars.get(name) {
                termios.special_codes[slot] = byte.unwrap_or(DISABLED);
            }
        }
        for &(name, flag) in FLAGS {
            if let Some(&on) = self.flags.get(name) {
                flag.set(termios, on);
            }
        }
        if let Some(speed) = self.ispeed {
            termios.set_input_speed(speed)?;
        }
        if let Some(speed) = self.ospeed {
            termios.set_output_speed(speed)?;
        }
        Ok(())
    }
}

impl Flag {
    fn is_set(self, termios: &Termios) -> bool {
        match self {
            Flag::Input(bit) => termios.input_modes.contains(bit),
            Flag::Output(bit) => termios.output_modes.contains(bit),
            Flag::Local(bit) => termios.local_modes.contains(bit),
            Flag::Control(bit) => termios.control_modes.contains(bit),
            Flag::CharSize(size) => termios.control_modes.intersection(ControlModes::CSIZE) == size,
        }
    }

    fn set(self, termios: &mut Termios, on: bool) {
        match self {
            Flag::Input(bit) => termios.input_modes.set(bit, on),
            Flag::Output(bit) => termios.output_modes.set(bit, on),
            Flag::Local(bit) => termios.local_modes.set(bit, on),
            Flag::Control(bit) => termios.control_modes.set(bit, on),
            Flag::CharSize(size) if on => {
                termios.control_modes.remove(ControlModes::CSIZE);
                termios.control_modes.insert(size);
            }
            Flag::CharSize(_) => {}
        }
    }
}

crate::objects::object_only!(
    TerminalModes,
    "a JSON object like {\"chars\": {\"erase\": 127}, \"flags\": {\"echo\": true}}"
);

/// `chars`: the known names, each a byte or null; the unknown ones dropped (null for the whole map: none).
fn known_chars<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, Option<u8>>, D::Error> {
    let mut chars = BTreeMap::new();
    for (name, value) in Option::<BTreeMap<String, serde_json::Value>>::deserialize(deserializer)?.unwrap_or_default() {
        if !CONTROL_CHARS.iter().any(|&(known, _)| known == name) {
            continue;
        }
        let byte = match &value {
            serde_json::Value::Null => None,
            other => {
                Some(other.as_number().and_then(crate::objects::whole).and_then(|n| u8::try_from(n).ok()).ok_or_else(
                    || {
                        D::Error::custom(format!(
                    "tty.modes.chars.{name} must be the byte its key sends (0 to 255: 127 for ^?, 8 for ^H) or null \
                     for none, not {value}"
                ))
                    },
                )?)
            }
        };
        chars.insert(name, byte);
    }
    Ok(chars)
}

/// `flags`: the known names, each true or false (`cs7` and `cs8` not both true); the unknown ones dropped (null
/// for the whole map: none).
fn known_flags<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, bool>, D::Error> {
    let mut flags = BTreeMap::new();
    for (name, value) in Option::<BTreeMap<String, serde_json::Value>>::deserialize(deserializer)?.unwrap_or_default() {
        if !FLAGS.iter().any(|&(known, _)| known == name) {
            continue;
        }
        let on = value
            .as_bool()
            .ok_or_else(|| D::Error::custom(format!("tty.modes.flags.{name} must be true or false, not {value}")))?;
        flags.insert(name, on);
    }
    if flags.get("cs7") == Some(&true) && flags.get("cs8") == Some(&true) {
        return Err(D::Error::custom("tty.modes.flags: cs7 and cs8 are both true, and a character has one size"));
    }
    Ok(flags)
}

fn ispeed<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    speed(deserializer, "ispeed")
}

fn ospeed<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    speed(deserializer, "ospeed")
}

/// A speed: a baud rate above 0 (0 is "hang up", not a speed), or null for none.
fn speed<'de, D: Deserializer<'de>>(deserializer: D, field: &str) -> Result<Option<u32>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    if value.is_null() {
        return Ok(None);
    }
    match value.as_number().and_then(crate::objects::whole).and_then(|n| u32::try_from(n).ok()).filter(|&n| n > 0) {
        Some(speed) => Ok(Some(speed)),
        None => Err(D::Error::custom(format!(
            "tty.modes.{field} must be a speed in baud (a whole number from 1 to 4294967295, e.g. 38400), not {value}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<TerminalModes, String> {
        serde_json::from_str(json).map_err(|err| err.to_string())
    }

    #[test]
    fn unknown_names_are_dropped_and_bad_values_named() {
        let modes = parse(r#"{"chars":{"erase":8,"eol":null,"status":"^T"},"flags":{"icrnl":false,"future":7}}"#);
        let modes = modes.unwrap();
        assert_eq!(modes.chars, BTreeMap::from([("eol".into(), None), ("erase".into(), Some(8))]));
        assert_eq!(modes.flags, BTreeMap::from([("icrnl".into(), false)]));
        assert_eq!(parse(r#"{"later":{"x":1}}"#).unwrap(), TerminalModes::default());
        let nulls = r#"{"chars":null,"flags":null,"ispeed":null,"ospeed":null}"#;
        assert_eq!(parse(nulls).unwrap(), TerminalModes::default());
        for (json, named) in [
            (r#"{"chars":{"erase":256}}"#, "tty.modes.chars.erase must be the byte"),
            (r#"{"chars":{"intr":"^C"}}"#, "tty.modes.chars.intr must be the byte"),
            (r#"{"chars":{"kill":-1}}"#, "tty.modes.chars.kill must be"),
            (r#"{"flags":{"echo":1}}"#, "tty.modes.flags.echo must be true or false, not 1"),
            (r#"{"flags":{"cs7":true,"cs8":true}}"#, "cs7 and cs8 are both true"),
            (r#"{"ispeed":0}"#, "tty.modes.ispeed must be a speed in baud"),
            (r#"{"ospeed":"fast"}"#, "tty.modes.ospeed must be a speed in baud"),
            (r#"{"chars":[3]}"#, "expected a map"),
        ] {
            let err = parse(json).unwrap_err();
            assert!(err.contains(named), "{json}: {err}");
        }
    }

    #[test]
    fn what_is_read_from_a_termios_is_what_is_laid_over_another() {
        let pty = rustix::pty::openpt(rustix::pty::OpenptFlags::RDWR | rustix::pty::OpenptFlags::NOCTTY);
        // A pty's master is a terminal: its modes are the slave's, and stand in for a local terminal here.
        let Ok(master) = pty else { panic!("no pty: {pty:?}") };
        let fresh = rustix::termios::tcgetattr(&master).unwrap();
        let mut changed = fresh.clone();
        changed.special_codes[SpecialCodeIndex::VERASE] = 8;
        changed.special_codes[SpecialCodeIndex::VEOL] = 0;
        changed.input_modes.remove(InputModes::IXON);
        changed.input_modes.insert(InputModes::IUTF8);
        changed.local_modes.remove(LocalModes::ECHOCTL);
        changed.control_modes.remove(ControlModes::CSIZE);
        changed.control_modes.insert(ControlModes::CS7 | ControlModes::PARENB);
        changed.set_speed(9600).unwrap();
        let modes = TerminalModes::of(&changed);
        assert_eq!((modes.chars["erase"], modes.chars["eol"], modes.chars["intr"]), (Some(8), None, Some(3)));
        assert_eq!((modes.flags["cs7"], modes.flags["cs8"], modes.flags["ixon"]), (true, false, false));
        assert_eq!((modes.ispeed, modes.ospeed), (Some(9600), Some(9600)));
        let wire: TerminalModes = serde_json::from_str(&serde_json::to_string(&modes).unwrap()).unwrap();
        assert_eq!(wire, modes);
        let mut applied = fresh.clone();
        wire.apply(&mut applied).unwrap();
        assert_eq!(TerminalModes::of(&applied), modes);
        assert_eq!(format!("{applied:?}"), format!("{changed:?}"), "every mode the wire names, and only those");
        let mut untouched = fresh.clone();
        TerminalModes::default().apply(&mut untouched).unwrap();
        assert_eq!(format!("{untouched:?}"), format!("{fresh:?}"));
    }
}
