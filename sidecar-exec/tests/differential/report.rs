//! Comparing a case's native and forwarded runs, one line per case, and the column's verdict: every difference
//! must be a known one (KNOWN_DIFFERENCES), and every known one must still be there.

use std::io::Write;

use super::harness::{Captured, Case, Observed, Stopping};
use super::known::{Column, Known, KNOWN_DIFFERENCES};

/// What can differ between a native and a forwarded run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aspect {
    Stdout,
    Stderr,
    /// stdout and stderr in one pipe (a merged case's only stream).
    Interleaving,
    /// What a terminal showed: stdout and stderr on it, and the echo of what was typed (the terminal column's
    /// only stream).
    Screen,
    ExitCode,
    /// Hung, left processes behind, ended before a step it should have outlived, or did not stop on Ctrl-Z.
    Stopping,
}

impl Aspect {
    fn name(self) -> &'static str {
        match self {
            Aspect::Stdout => "stdout",
            Aspect::Stderr => "stderr",
            Aspect::Interleaving => "interleaving",
            Aspect::Screen => "screen",
            Aspect::ExitCode => "exit code",
            Aspect::Stopping => "stopping",
        }
    }
}

/// One case's native and forwarded runs.
pub struct Outcome {
    pub case: Case,
    pub native: Observed,
    pub forwarded: Observed,
    /// Both ran on a terminal: `stdout` is the screen.
    pub screen: bool,
}

impl Outcome {
    /// The aspects in which the two runs differ, in a fixed order.
    pub fn differences(&self) -> Vec<Aspect> {
        let (native, forwarded) = (&self.native, &self.forwarded);
        let mut differ = Vec::new();
        if native.stdout != forwarded.stdout {
            differ.push(match (self.screen, self.case.merged) {
                (true, _) => Aspect::Screen,
                (false, true) => Aspect::Interleaving,
                (false, false) => Aspect::Stdout,
            });
        }
        if native.stderr != forwarded.stderr {
            differ.push(Aspect::Stderr);
        }
        if native.status != forwarded.status {
            differ.push(Aspect::ExitCode);
        }
        if native.stopping != forwarded.stopping {
            differ.push(Aspect::Stopping);
        }
        differ
    }

    /// What each differing aspect was on each side, for the lines under the case's.
    fn details(&self, differ: &[Aspect]) -> Vec<String> {
        let (native, forwarded) = (&self.native, &self.forwarded);
        let none = Captured::default();
        differ
            .iter()
            .map(|aspect| {
                let (here, there) = match aspect {
                    Aspect::Stdout | Aspect::Interleaving | Aspect::Screen => {
                        excerpts(&native.stdout, &forwarded.stdout)
                    }
                    Aspect::Stderr => {
                        excerpts(native.stderr.as_ref().unwrap_or(&none), forwarded.stderr.as_ref().unwrap_or(&none))
                    }
                    Aspect::ExitCode => (native.status.to_string(), forwarded.status.to_string()),
                    Aspect::Stopping => (stopping(&native.stopping), stopping(&forwarded.stopping)),
                };
                format!("      {}: native {here} | forwarded {there}", aspect.name())
            })
            .collect()
    }
}

/// Two streams as the report shows them: their lengths, and each from a little before where they first differ,
/// escaped.
fn excerpts(native: &Captured, forwarded: &Captured) -> (String, String) {
    const SHOWN: usize = 90;
    let first = native.head.iter().zip(&forwarded.head).take_while(|(a, b)| a == b).count();
    let from = first.saturating_sub(20);
    let show = |captured: &Captured| {
        let part = captured.head.get(from..).unwrap_or_default();
        let text: String =
            part.iter().take(SHOWN).flat_map(|byte| std::ascii::escape_default(*byte)).map(char::from).collect();
        let (before, after) = (if from > 0 { "…" } else { "" }, if part.len() > SHOWN { "…" } else { "" });
        format!("{} bytes \"{before}{text}{after}\"", captured.len)
    };
    (show(native), show(forwarded))
}

/// What went wrong with stopping, in words.
fn stopping(stopping: &Stopping) -> String {
    let mut said = Vec::new();
    if stopping.hung {
        said.push("hung".to_owned());
    }
    if stopping.left_behind > 0 {
        said.push(format!("left {} processes running", stopping.left_behind));
    }
    if let Some(step) = stopping.ended_before_step {
        said.push(format!("ended before step {}", step + 1));
    }
    match stopping.group_stopped {
        Some(false) => said.push("its group did not stop on SIGTSTP".to_owned()),
        Some(true) => said.push("its group stopped on SIGTSTP".to_owned()),
        None => {}
    }
    match stopping.command_stopped {
        Some(false) => said.push("the command did not stop".to_owned()),
        Some(true) => said.push("the command stopped".to_owned()),
        None => {}
    }
    if said.is_empty() {
        "ended by itself".to_owned()
    } else {
        said.join(", ")
    }
}

/// How one case came out against the table.
enum Verdict<'a> {
    Identical,
    /// Listed, and it differs only in aspects its entry names.
    Known(&'a Known),
    /// Differs where no entry says it may.
    Unexpected(Vec<Aspect>),
    /// Listed, but identical now: the entry must go.
    NoLongerDiffers(&'a Known),
}

/// Prints one line per case (and what differed, under it) and the column's count, straight to stderr so that
/// they show in every run, captured or not; fails the test on an unexpected difference, on a listed case that no
/// longer differs, and on an entry that names no case of the corpus.
pub fn judge(column: Column, outcomes: &[Outcome]) {
    let listed: Vec<&Known> = KNOWN_DIFFERENCES.iter().filter(|known| known.column == column).collect();
    let mut lines = Vec::new();
    let (mut identical, mut known, mut unexpected, mut stale, mut failures) = (0, 0, 0, 0, Vec::new());
    for outcome in outcomes {
        let name = outcome.case.name;
        let differ = outcome.differences();
        let entry = listed.iter().copied().find(|known| known.case == name);
        let verdict = match (entry, differ.is_empty()) {
            (None, true) => Verdict::Identical,
            (Some(entry), true) => Verdict::NoLongerDiffers(entry),
            (Some(entry), false) if differ.iter().all(|aspect| entry.aspects.contains(aspect)) => Verdict::Known(entry),
            (_, false) => Verdict::Unexpected(
                differ.iter().copied().filter(|a| !entry.is_some_and(|e| e.aspects.contains(a))).collect(),
            ),
        };
        let took = format!(
            " ({:.1} s native, {:.1} s forwarded)",
            outcome.native.took.as_secs_f64(),
            outcome.forwarded.took.as_secs_f64()
        );
        let names = |aspects: &[Aspect]| aspects.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ");
        match &verdict {
            Verdict::Identical => {
                identical += 1;
                lines.push(format!("  {name}: identical{took}"));
            }
            Verdict::Known(entry) => {
                known += 1;
                lines.push(format!("  {name}: differs (known): {}{took} — {}", names(&differ), entry.reason));
            }
            Verdict::Unexpected(aspects) => {
                unexpected += 1;
                lines.push(format!("  {name}: differs (UNEXPECTED): {}{took}", names(&differ)));
                failures.push(format!("{name} differs in {}, which KNOWN_DIFFERENCES does not list", names(aspects)));
            }
            Verdict::NoLongerDiffers(entry) => {
                stale += 1;
                lines.push(format!("  {name}: identical{took}, but listed in KNOWN_DIFFERENCES ({})", entry.reason));
                failures
                    .push(format!("{name} no longer differs: remove its KNOWN_DIFFERENCES entry (and its docs line)"));
            }
        }
        if !differ.is_empty() {
            lines.extend(outcome.details(&differ));
        }
    }
    for entry in &listed {
        if !outcomes.iter().any(|outcome| outcome.case.name == entry.case) {
            failures.push(format!("KNOWN_DIFFERENCES names {}, which is not in the corpus", entry.case));
        }
    }
    let stale = if stale > 0 { format!(", {stale} listed but identical now") } else { String::new() };
    lines.push(format!(
        "differential suite, {}: {identical} identical, {known} known differences, {unexpected} unexpected{stale} \
         (of {} cases)",
        column.name(),
        outcomes.len()
    ));
    let mut stderr = std::io::stderr().lock();
    let _ =
        writeln!(stderr, "\ndifferential suite, {} column (native vs forwarded):\n{}", column.name(), lines.join("\n"));
    assert!(failures.is_empty(), "the {} column of the differential suite:\n{}", column.name(), failures.join("\n"));
}
