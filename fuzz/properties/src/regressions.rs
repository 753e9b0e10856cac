//! Every input saved under `fuzz/regressions/<target>/` (the minimised corpus of each fuzz target and each crash
//! it found) replayed through the target's properties: what fuzzing once found stays fixed without a fuzzer.

use std::path::PathBuf;

fn folder(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../regressions").join(target)
}

#[test]
fn every_saved_input_keeps_its_targets_properties() {
    let mut failed = Vec::new();
    for (target, check) in crate::TARGETS {
        let mut inputs: Vec<PathBuf> = std::fs::read_dir(folder(target))
            .unwrap_or_else(|error| panic!("{}: {error}", folder(target).display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        inputs.sort();
        // An empty folder would make this test pass by checking nothing.
        assert!(inputs.len() >= MIN_INPUTS, "{target}: only {} saved inputs", inputs.len());
        for input in inputs {
            let bytes = std::fs::read(&input).unwrap();
            if std::panic::catch_unwind(|| check(&bytes)).is_err() {
                failed.push(input.display().to_string());
            }
        }
    }
    assert!(
        failed.is_empty(),
        "inputs that break their target's properties (each panic above):\n{}",
        failed.join("\n")
    );
}

/// The fewest inputs a target's folder holds: its seeds and what `fuzz/run.sh` minimised.
const MIN_INPUTS: usize = 5;
