//! `sidecar-ipc clear-context`: asks the agent to forget the conversation so far (no answer comes back).

use std::time::Duration;

use crate::exit::ExitError;
use crate::ids::new_id;
use crate::ipc::{self, Ipc};
use crate::wire::ClearContextRequest;

/// How long to wait after writing the clear. The agent-runner polls every 150 ms and, in one poll, answers new
/// requests before it applies new clears: a prompt written right after a clear could be answered with the old
/// history. Two poll periods let the clear be applied first; the cost is small next to an LLM call.
pub const PAUSE: Duration = Duration::from_millis(300);

pub async fn clear_context(ipc: &Ipc, reason: Option<String>) -> Result<(), ExitError> {
    ipc.ensure_dirs()?;
    let id = new_id();
    ipc::write_json(&ipc.clear(&id), &ClearContextRequest { request_id: id.clone(), reason })?;
    tokio::time::sleep(PAUSE).await;
    Ok(())
}
