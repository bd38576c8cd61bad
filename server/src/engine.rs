//! The engine thread: it owns the model's session and its
//! [`Decoder`](stencil_runtime::decode::Decoder), takes jobs from a bounded queue, and
//! advances every admitted request together, one llama.cpp batch per step.
//!
//! ```text
//!  handlers ──try_send(Job)──▶ queue (bounded) ──▶ waiting (one) ──add_samples──▶ Decoder
//!     ▲                                                                              │ step
//!     └──────────── Event::{Started, Text, Done, Failed} (one channel per request) ◀─┘
//! ```
//!
//! A job is admitted when the decoder has `n` free sequences and room in the context for
//! its prompt and `n × max_tokens` ([`stencil_runtime::RuntimeError::TooManySequences`]
//! otherwise: it waits, first in line, and is tried again when a sequence finishes). A job
//! whose client went away (its event channel closed) is dropped from the queue, or has its
//! sequences cancelled, which frees them at the next step.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use stencil_runtime::decode::SequenceHandle;
use stencil_runtime::{GenerateRequest, Generation, Model, ModelOptions, RuntimeError, SessionOptions};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use crate::error::ApiError;
use crate::metrics::Metrics;

/// What a handler asks the engine to run.
pub struct Job {
    /// The request, its grammar compiled and its `max_tokens` set.
    pub request: GenerateRequest,
    /// Completions (samples of the one prompt, decoded together).
    pub n: usize,
    /// Where the engine sends what happens.
    pub events: UnboundedSender<Event>,
    /// When the job was queued.
    pub queued_at: Instant,
}

/// What happens to a job.
#[derive(Debug)]
pub enum Event {
    /// The job has its sequences; decoding starts.
    Started,
    /// New text of completion `index`.
    Text {
        /// Which completion.
        index: usize,
        /// The text (final: valid UTF-8, never part of a stop string).
        text: String,
    },
    /// Completion `index` finished.
    Done {
        /// Which completion.
        index: usize,
        /// Its generation, or why it failed.
        result: Result<Box<Generation>, RuntimeError>,
    },
    /// The job could not be run at all.
    Failed(ApiError),
}

/// What the engine thread needs.
pub struct EngineSettings {
    /// The GGUF file.
    pub model_path: std::path::PathBuf,
    /// The draft model's GGUF file, if any: loaded after the model and attached to the
    /// session.
    pub draft_path: Option<std::path::PathBuf>,
    /// The session: `n_seq_max` = --parallel, `n_ctx` = --ctx-size.
    pub session: SessionOptions,
    /// A chat template that replaces the model's (`--chat-template-file`).
    pub chat_template: Option<String>,
}

/// A job being decoded.
struct Active {
    events: UnboundedSender<Event>,
    /// Its handles, in completion order.
    handles: Vec<SequenceHandle>,
    /// Completions not finished yet.
    remaining: usize,
    /// Prompt tokens counted (once per job).
    counted_prompt: bool,
}

/// Runs the engine on the current thread until the queue's senders are all gone (or
/// `abort` is set): loads the model (logging progress) and the draft model, publishes the
/// model in `model`, reports the load on `loaded`, then serves jobs.
pub fn run(
    settings: EngineSettings,
    jobs: Receiver<Job>,
    model: Arc<OnceLock<Arc<Model>>>,
    loaded: oneshot::Sender<Result<(), RuntimeError>>,
    metrics: Arc<Metrics>,
    abort: Arc<AtomicBool>,
) {
    let start = Instant::now();
    let (loaded_model, draft) = match load_models(&settings, &abort) {
        Ok(models) => models,
        Err(e) => {
            let _ = loaded.send(Err(e));
            return;
        }
    };
    let session = loaded_model.session(&settings.session).and_then(|mut s| {
        if let Some(draft) = &draft {
            s.attach_draft(draft)?;
            tracing::info!(draft = %draft.info().name, "draft model attached");
        }
        Ok(s)
    });
    let mut session = match session {
        Ok(s) => s,
        Err(e) => {
            let _ = loaded.send(Err(e));
            return;
        }
    };
    let info = loaded_model.info();
    tracing::info!(
        name = %info.name,
        vocab = info.n_vocab,
        params = info.n_params,
        ms = start.elapsed().as_millis() as u64,
        parallel = settings.session.n_seq_max,
        ctx = settings.session.n_ctx,
        "model loaded"
    );
    let _ = model.set(loaded_model.clone());
    let _ = loaded.send(Ok(()));

    let mut batch = session.decoder();
    let mut active: HashMap<u64, Active> = HashMap::new();
    let mut by_handle: HashMap<SequenceHandle, (u64, usize)> = HashMap::new();
    let mut next_job: u64 = 0;
    let mut waiting: Option<Job> = None;
    // Whether the waiting job may fit now (something finished since it was refused).
    let mut may_fit = true;
    let mut closed = false;

    loop {
        if abort.load(Ordering::Relaxed) {
            for a in active.values() {
                for &h in &a.handles {
                    batch.cancel(h);
                }
            }
            if let Some(job) = waiting.take() {
                metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                let _ = job.events.send(Event::Failed(ApiError::unavailable("the server is shutting down")));
            }
            while let Ok(job) = jobs.try_recv() {
                metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                let _ = job.events.send(Event::Failed(ApiError::unavailable("the server is shutting down")));
            }
        }
        // Take the next job: block while there is nothing else to do.
        if waiting.is_none() && !closed {
            let next = if batch.is_idle() {
                match jobs.recv_timeout(Duration::from_millis(200)) {
                    Ok(job) => Some(job),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => {
                        closed = true;
                        None
                    }
                }
            } else {
                match jobs.try_recv() {
                    Ok(job) => Some(job),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => {
                        closed = true;
                        None
                    }
                }
            };
            if next.is_some() {
                may_fit = true;
            }
            waiting = next;
        }
        if closed && waiting.is_none() && batch.is_idle() {
            break;
        }

        // Admit what fits.
        while may_fit {
            let Some(job) = waiting.take() else { break };
            if job.events.is_closed() {
                metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                metrics.cancelled.fetch_add(job.n as u64, Ordering::Relaxed);
                waiting = jobs.try_recv().ok();
                continue;
            }
            match batch.add_samples(&job.request, job.n) {
                Ok(handles) => {
                    metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                    metrics.active.fetch_add(1, Ordering::Relaxed);
                    metrics.queue_time.observe(job.queued_at.elapsed().as_secs_f64());
                    let id = next_job;
                    next_job += 1;
                    for (i, &h) in handles.iter().enumerate() {
                        by_handle.insert(h, (id, i));
                    }
                    let _ = job.events.send(Event::Started);
                    active.insert(
                        id,
                        Active { events: job.events, remaining: handles.len(), handles, counted_prompt: false },
                    );
                    waiting = jobs.try_recv().ok();
                }
                Err(RuntimeError::TooManySequences { .. }) if !batch.is_idle() => {
                    waiting = Some(job);
                    may_fit = false;
                }
                Err(e) => {
                    metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                    let _ = job.events.send(Event::Failed(runtime_error(e)));
                    waiting = jobs.try_recv().ok();
                }
            }
        }
        let finished = batch.take_finished(|h, piece| send_text(&active, &by_handle, h, piece));
        may_fit |= dispatch(finished, &mut active, &mut by_handle, &metrics);

        // Clients that went away.
        for a in active.values() {
            if a.events.is_closed() {
                for &h in &a.handles {
                    if batch.cancel(h) {
                        metrics.cancelled.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }

        if batch.is_idle() {
            continue;
        }
        metrics.steps.fetch_add(1, Ordering::Relaxed);
        match batch.step(|h, piece| send_text(&active, &by_handle, h, piece)) {
            Ok(finished) => may_fit |= dispatch(finished, &mut active, &mut by_handle, &metrics),
            Err(e) => {
                // The forward pass failed: every live sequence is lost. Start over with a
                // fresh decoder and an empty KV cache.
                tracing::error!(error = %e, "llama.cpp decode failed; failing the active requests");
                for (_, a) in active.drain() {
                    metrics.active.fetch_sub(1, Ordering::Relaxed);
                    let _ = a.events.send(Event::Failed(ApiError::internal(format!("decoding failed: {e}"))));
                }
                by_handle.clear();
                drop(batch);
                session.reset();
                batch = session.decoder();
                may_fit = true;
            }
        }
    }
    tracing::info!("engine stopped");
}

/// Loads the model (logging its progress; `abort` stops it) and the draft model, if any.
fn load_models(
    settings: &EngineSettings,
    abort: &Arc<AtomicBool>,
) -> Result<(Arc<Model>, Option<Model>), RuntimeError> {
    let path = &settings.model_path;
    tracing::info!(model = %path.display(), "loading model");
    let abort = abort.clone();
    let mut logged = 0;
    let options = ModelOptions { chat_template: settings.chat_template.clone(), ..ModelOptions::default() };
    let model = Model::load_with_progress(path, &options, move |fraction| {
        let percent = (fraction * 100.0) as u32;
        if percent >= logged + 25 {
            logged = percent - percent % 25;
            tracing::info!(percent = logged, "loading model");
        }
        !abort.load(Ordering::Relaxed)
    })?;
    let draft = settings.draft_path.as_deref().map(|p| Model::load(p, &ModelOptions::default())).transpose()?;
    Ok((Arc::new(model), draft))
}

fn send_text(
    active: &HashMap<u64, Active>,
    by_handle: &HashMap<SequenceHandle, (u64, usize)>,
    handle: SequenceHandle,
    piece: &str,
) {
    if let Some((job, index)) = by_handle.get(&handle) {
        if let Some(a) = active.get(job) {
            let _ = a.events.send(Event::Text { index: *index, text: piece.to_string() });
        }
    }
}

/// Sends finished completions to their jobs; true when any finished (room freed).
fn dispatch(
    finished: Vec<(SequenceHandle, Result<Generation, RuntimeError>)>,
    active: &mut HashMap<u64, Active>,
    by_handle: &mut HashMap<SequenceHandle, (u64, usize)>,
    metrics: &Metrics,
) -> bool {
    let any = !finished.is_empty();
    for (handle, result) in finished {
        let Some((job, index)) = by_handle.remove(&handle) else { continue };
        let Some(a) = active.get_mut(&job) else { continue };
        if let Ok(g) = &result {
            let r = &g.record;
            if !a.counted_prompt {
                metrics.prompt_tokens.fetch_add(r.prompt_tokens as u64, Ordering::Relaxed);
                a.counted_prompt = true;
            }
            metrics.completion_tokens.fetch_add(r.generated_tokens as u64, Ordering::Relaxed);
            metrics.forced_tokens.fetch_add(r.forced_tokens as u64, Ordering::Relaxed);
            if let Some(spec) = &r.speculation {
                metrics.drafted_tokens.fetch_add(spec.drafted as u64, Ordering::Relaxed);
                metrics.accepted_tokens.fetch_add(spec.accepted as u64, Ordering::Relaxed);
            }
            metrics.mask_us.fetch_add((r.timings.mask_ms * 1e3) as u64, Ordering::Relaxed);
            metrics.mask_wait_us.fetch_add((r.timings.mask_wait_ms * 1e3) as u64, Ordering::Relaxed);
            if r.generated_tokens > 0 {
                metrics.mask_time_per_token.observe(r.timings.mask_ms_per_token / 1e3);
            }
        }
        let _ = a.events.send(Event::Done { index, result: result.map(Box::new) });
        a.remaining -= 1;
        if a.remaining == 0 {
            active.remove(&job);
            metrics.active.fetch_sub(1, Ordering::Relaxed);
        }
    }
    any
}

/// The answer for a runtime error: the request's fault (400) or the server's (500).
pub fn runtime_error(e: RuntimeError) -> ApiError {
    match &e {
        RuntimeError::ContextOverflow { .. } | RuntimeError::TooManySequences { .. } => {
            ApiError::invalid(e.to_string(), Some("messages")).with_code("context_length_exceeded")
        }
        RuntimeError::EmptyPrompt => ApiError::invalid(e.to_string(), Some("messages")),
        RuntimeError::ChatTemplate(_) | RuntimeError::NoChatTemplate => {
            ApiError::invalid(e.to_string(), Some("messages")).with_code("invalid_message")
        }
        RuntimeError::Sampling(stencil_runtime::sampling::SamplingError::InvalidParam { field, .. }) => {
            ApiError::invalid(e.to_string(), Some(field))
        }
        _ => ApiError::internal(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_errors_map_to_statuses() {
        let e = runtime_error(RuntimeError::ContextOverflow { prompt: 10, max_tokens: 5, n_ctx: 8 });
        assert_eq!((e.status.as_u16(), e.code.as_deref()), (400, Some("context_length_exceeded")));
        let e = runtime_error(RuntimeError::ChatTemplate("roles must alternate".into()));
        assert_eq!((e.status.as_u16(), e.param.as_deref()), (400, Some("messages")));
        assert!(e.message.contains("roles must alternate"));
        let e = runtime_error(RuntimeError::Decode("boom".into()));
        assert_eq!(e.status.as_u16(), 500);
    }
}
