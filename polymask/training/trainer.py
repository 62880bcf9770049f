"""The training loop: one modality, one objective, the shared encoder.

Reads top to bottom: build everything from the config, optionally restore a checkpoint, then
loop over optimiser steps (micro-batches, loss, backward, clip, step), validating, logging and
checkpointing on schedule. ``train()`` returns the run summary. Under ``torchrun`` every rank
runs this same loop on its share of each step's micro-batches (see ``training.distributed``).

Faults: a run holds a lock on its folder (``locks``); a step with a non-finite loss or gradient is
skipped and counted, ``train.max_nonfinite_steps`` in a row stop the run; SIGINT/SIGTERM finish
the step, save, and write the summary marked interrupted (``training.signals``); under torchrun, a rank
that another leaves waiting ``train.dist_timeout`` seconds, or that loses its peer, stops in one line.
"""
from __future__ import annotations

import math
import random
import signal
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence

import torch
from datasets import Dataset
from tokenizers import Tokenizer
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

from polymask.checkpoints.pretrained import (
    LoadedCheckpoint,
    checkpoint_folder,
    optimizer_state_from,
    read_checkpoint,
    resolve_checkpoint,
    save_checkpoint,
)
from polymask.config import RunConfig, TrainConfig, build_run_config
from polymask.data.batching import Batch, BatchSampler, collate
from polymask.data.corpus import CorpusReport, copy_skipped, prepare_corpus
from polymask.data.streaming import StreamingBatches
from polymask.data.streams import IndexedBatches, MicroBatch, StreamPosition
from polymask.errors import CheckpointError, ConfigError, RankLost, RunInterrupted, TrainingDiverged
from polymask.jsonio import make_dir
from polymask.locks import FolderLock, lock_run_folder
from polymask.modalities import build_modality
from polymask.model.encoder import Encoder
from polymask.objectives import build_objective
from polymask.objectives.base import ObjectiveOutput, checked_output
from polymask.runtime import (
    autocast,
    precision_used,
    progress_bar,
    resolve_device,
    restore_rng,
    rng_tensors,
    step_generator,
    tqdm_write,
)
from polymask.tensor_checks import check_weights
from polymask.tokenization import SpecialIds
from polymask.tracking import TrackedRun, open_reporter, require
from polymask.training.collapse import CollapseMonitor, FinalStates, unigram_accuracy
from polymask.training.distributed import init_distributed, peer_failure, wrap_model
from polymask.training.memory import ResourceTrace
from polymask.training.run_folder import Existing, claim_run_folder, finished_summary, resume_point
from polymask.training.schedule import build_optimizer, learning_rate
from polymask.training.signals import StopRequests, exit_code, signal_name
from polymask.training.summary import TIME_NOTE, MetricsLog, write_summary

VALIDATION_STREAM = 1
AUGMENT_STREAM = 2
FULL_STATE = StateDictOptions(full_state_dict=True, cpu_offload=True)


@dataclass
class TrainState(StreamPosition):
    """Everything besides tensors that a resumed run needs (the data position included)."""

    step: int = 0
    tokens: int = 0
    padded_tokens: int = 0
    train_time: float = 0.0
    best_val_loss: float | None = None
    skipped_steps: int = 0


class StepResult(NamedTuple):
    """One optimiser step: its loss (the mean over ranks and micro-batches; NaN when the step was skipped for a
    non-finite loss or gradient, and no update was made) and its real (non-padding) and padded token counts."""

    loss: float
    real_tokens: int
    padded_tokens: int


def resolve_shape_multiple(train_config: TrainConfig, device: torch.device) -> int:
    """``train.shape_multiple``, or its default: 16 under bf16 autocast on a CPU (whose kernels are cached per
    shape, growing resident memory with every new batch shape), else 1."""
    if train_config.shape_multiple is not None:
        return train_config.shape_multiple
    return 16 if device.type == "cpu" and precision_used(device, train_config.precision) == "bf16" else 1


class Trainer:
    """Builds the run from a ``RunConfig`` and trains it: ``fit()`` runs the loop, ``step()`` one optimiser step."""

    def __init__(self, config: RunConfig, data: Dataset | None = None, run_dir: Path | None = None,
                 tokenizer: Tokenizer | None = None, existing: Existing = "refuse") -> None:
        self.config = config
        train_config = config.train
        self.dist = init_distributed(train_config.device, train_config.dist_timeout)
        self.run_dir = run_dir or config.out_dir()
        self.run_lock: FolderLock | None = None
        try:
            require(train_config.report_to, "train.report_to")  # a missing package fails now, before the corpus is read
            if self.dist.is_main:
                make_dir(self.run_dir)
                self.run_lock = lock_run_folder(self.run_dir)
                claim_run_folder(self.run_dir, existing)
            self._build(data, tokenizer)
        except BaseException:
            self.close()
            raise

    def _build(self, data: Dataset | None, tokenizer: Tokenizer | None) -> None:
        config = self.config
        train_config = config.train
        if train_config.threads:
            torch.set_num_threads(train_config.threads)
        self.device = resolve_device(f"cuda:{self.dist.local_rank}" if self.dist.enabled and train_config.device
                                     in ("auto", "cuda") and torch.cuda.is_available() else train_config.device)
        torch.manual_seed(train_config.seed)
        random.seed(train_config.seed)

        self.modality = build_modality(config.modality)
        self.tokenizer = tokenizer or self.modality.load_tokenizer()
        self.specials = SpecialIds.of(self.tokenizer)
        self._prepare_data(data)

        #: every batch width (and what the objective pads) is rounded up to a multiple of this
        self.shape_multiple = resolve_shape_multiple(train_config, self.device)
        self.encoder = Encoder(config.model, self.tokenizer.get_vocab_size())  # model.rope_2d is the objective's
        self.objective = build_objective(config.objective, self.encoder, self.specials, self.modality.mask_span,
                                     self.shape_multiple).to(self.device)
        if train_config.absent_token_bias is not None and self.train_token_counts is not None:
            self.objective.lower_absent_tokens(self.train_token_counts, train_config.absent_token_bias)
        if train_config.compile:
            self.encoder.compile()
        self.wrapped_objective = wrap_model(self.objective, self.dist, self.device, train_config.parallel)
        self.optimizer = build_optimizer(self.objective, train_config)
        self.valid_batches = BatchSampler(self.valid_store.lengths, train_config.batch_size, train_config.seed,
                                          "bucket", shuffle=False).epoch(0)
        self.state = TrainState()
        self.last_checkpoint: Path | None = None
        self.last_saved_step = -1
        self.metrics = MetricsLog(self.run_dir / "metrics.jsonl")
        self.collapse = self._collapse_monitor()
        self.resources = ResourceTrace(settled_step=0)  # replaced when fit() starts
        self._in_step = False  # True from a step's first batch until its state advances: an interrupt saves nothing

    def close(self) -> None:
        """Release the run folder and leave the process group this trainer joined (done by ``fit``; for a trainer
        that is never fitted)."""
        if self.run_lock is not None:
            self.run_lock.release()
        self.dist.close()

    def _prepare_data(self, data: Dataset | None) -> None:
        """Set ``batches`` (the training stream), ``valid_store``, ``corpus_report``, ``skipped_file`` and
        ``renamed_sources`` (the corpus files' names in ``skipped_file`` -> the names passed)."""
        config = self.config
        self.renamed_sources: dict[str, str] = {}
        sources = data if data is not None else (config.data.corpus_paths() or self.modality.corpus_paths())
        if config.data.streaming:
            self.skipped_file = self.run_dir / "skipped_records.jsonl"
            self.batches = StreamingBatches(
                self.modality, self.tokenizer, sources, column=config.data.column, max_len=config.data.max_len,
                batch_size=config.train.batch_size, pool_batches=config.data.bucket_pool,
                max_val_records=config.data.max_val_records, seed=config.train.seed,
                skipped_file=self.skipped_file if self.dist.is_main else None, val_fraction=config.data.val_fraction,
                strict=config.data.strict)
            self.valid_store = self.batches.validation_store()
            self.corpus_report = self.batches.report
            self.train_token_counts = None  # unknown until the stream has been read
            return

        def prepare() -> Any:
            return prepare_corpus(
                self.modality, self.tokenizer, sources, column=config.data.column, max_len=config.data.max_len,
                val_fraction=config.data.val_fraction, max_val_records=config.data.max_val_records,
                seed=config.train.seed, cache_dir=config.data.resolved_cache_dir(), strict=config.data.strict,
                num_proc=config.data.num_proc, exclude=config.data.exclude)

        corpus = prepare() if self.dist.is_main else None  # rank 0 tokenises; the others read its cache
        self.dist.barrier()
        corpus = corpus or prepare()
        sampler = BatchSampler(corpus.train.lengths, config.train.batch_size, config.train.seed, config.data.batching,
                               config.data.bucket_pool)
        self.batches = IndexedBatches(corpus.train, sampler)
        self.train_token_counts = corpus.train.token_counts(self.tokenizer.get_vocab_size())
        self.valid_store = corpus.valid
        self.corpus_report: CorpusReport = corpus.report
        self.skipped_file = corpus.skipped_file
        self.renamed_sources = corpus.renamed

    def _collapse_monitor(self) -> CollapseMonitor | None:
        """The collapse alarm, with the unigram accuracy of the validation split (None when disabled)."""
        settings = self.config.train.collapse
        if not settings.enabled or len(self.valid_store) == 0:
            return None
        unigram = unigram_accuracy((self.valid_store[i] for i in range(len(self.valid_store))), self.specials.all)
        first_step = settings.after_step if settings.after_step is not None else max(self.config.train.warmup_steps, 1)
        return CollapseMonitor(settings, unigram, first_step)

    # -- data -------------------------------------------------------------------------------------
    def device_batch(self, sequences: Sequence[Sequence[int]]) -> Batch:
        """Token sequences as one padded ``Batch`` on the trainer's device, as a step or ``evaluate()`` sees them."""
        batch = collate(sequences, self.specials.pad, self.shape_multiple)
        if self.device.type == "cuda":
            batch = batch.pin_memory()
        return batch.to(self.device)

    def _augmented(self, micro_batch: MicroBatch, seed: tuple[int, ...]) -> Sequence[Sequence[int]]:
        """The micro-batch's sequences, re-tokenised from augmented texts when the modality augments (a variant
        longer than ``data.max_len`` keeps the original)."""
        if not (micro_batch.texts and self.modality.config.augment):
            return micro_batch.sequences
        rng = random.Random(hash(seed))
        variants = [self.modality.tokenizer_input(self.modality.augment(text, rng)) for text in micro_batch.texts]
        encoded = self.tokenizer.encode_batch(variants)
        max_len = self.config.data.max_len
        return [e.ids if len(e.ids) <= max_len else s for e, s in zip(encoded, micro_batch.sequences)]

    # -- steps ------------------------------------------------------------------------------------
    def step(self, train_seconds: float = 0.0) -> StepResult:
        """One optimiser step on the next batches of the training stream (``grad_accum`` micro-batches per rank),
        then ``state`` advanced: the step counter, its tokens and its time. A step whose loss or gradient is not
        finite on any rank makes no update (its loss is NaN). ``train_seconds``: the training time so far, which
        places the step in a ``max_time`` schedule."""
        config = self.config.train
        started = time.perf_counter()
        self._in_step = True
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(self.state.step, config, train_seconds)
        step_batches = self.batches.take(config.grad_accum * self.dist.world_size, self.state)
        mine = self.dist.own(step_batches, config.grad_accum)
        loss_total, real, padded = 0.0, 0, 0
        for position, (index, micro_batch) in enumerate(mine):
            augment_seed = (config.seed, self.state.step, index, AUGMENT_STREAM)
            batch = self.device_batch(self._augmented(micro_batch, augment_seed))
            last = position == len(mine) - 1
            with self._gradient_sync(last), autocast(self.device, config.precision):
                output = self._forward(batch, step_generator(config.seed, self.state.step, index))
                (output.loss / config.grad_accum).backward()
            loss_total += output.loss.item() / config.grad_accum
            real += batch.real_tokens
            padded += batch.padded_tokens
        norm = torch.nn.utils.clip_grad_norm_(self.objective.parameters(), config.grad_clip or math.inf)
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm  # FSDP: a sharded norm
        nonfinite = not (math.isfinite(loss_total) and bool(torch.isfinite(norm)))
        loss_sum, real, padded, nonfinite = self.dist.sum([loss_total, real, padded, float(nonfinite)], self.device)
        if not nonfinite:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.state.train_time += time.perf_counter() - started
        self.state.step += 1
        self.state.tokens += int(real)
        self.state.padded_tokens += int(padded)
        self._in_step = False
        return StepResult(math.nan if nonfinite else loss_sum / self.dist.world_size, int(real), int(padded))

    def _forward(self, batch: Batch, generator: torch.Generator) -> ObjectiveOutput:
        """The objective's loss and prediction counts on ``batch`` (checked: a custom objective may return less)."""
        return checked_output(self.wrapped_objective(batch, generator), self.config.objective.name)

    def _gradient_sync(self, last_micro_batch: bool) -> Any:
        """DDP all-reduces gradients only after the last micro-batch of a step."""
        if last_micro_batch or not hasattr(self.wrapped_objective, "no_sync"):
            return torch.enable_grad()
        return self.wrapped_objective.no_sync()

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Validation loss and masked-token accuracy with fixed masks (the same at every evaluation)."""
        config = self.config.train
        self.objective.eval()
        loss_sum, predictions, correct, masked, masked_correct, shown = 0.0, 0, 0, 0, 0, False
        batches = self.valid_batches[:config.eval_batches] if config.eval_batches else self.valid_batches
        with FinalStates(self.encoder, self.specials.all, config.collapse.rank_tokens) as final_states:
            for index, indices in enumerate(batches):
                batch = self.device_batch([self.valid_store[int(i)] for i in indices])
                with autocast(self.device, config.precision):
                    output = self._forward(batch, step_generator(config.seed, index, 0, VALIDATION_STREAM))
                loss_sum += output.loss.item() * output.predictions
                predictions += output.predictions
                correct += int(output.correct)
                shown |= output.masked_predictions is not None
                masked += output.predictions if output.masked_predictions is None else output.masked_predictions
                masked_correct += int(output.correct if output.masked_correct is None else output.masked_correct)
        self.objective.train()
        if predictions == 0:
            return {}
        result = {"val_loss": loss_sum / predictions, "val_accuracy": correct / predictions,
                  "val_rank": final_states.rank()}
        if shown and masked:  # kept or random tokens among the predicted ones: the masked ones alone, apart
            result["val_mask_accuracy"] = masked_correct / masked
        return result

    # -- checkpoints --------------------------------------------------------------------------------
    def save(self) -> Path | None:
        """Checkpoint the current step (atomically; rank 0 writes, every rank then knows the folder)."""
        weights, optimizer_state = get_state_dict(self.objective, self.optimizer, options=FULL_STATE)
        if self.dist.is_main:
            save_checkpoint(
                self.run_dir, self.state.step, weights, optimizer_state,
                {"state": asdict(self.state), "python_rng": list(random.getstate()),
                 "collapse_alarms": self.collapse.alarms if self.collapse is not None else []},
                rng_tensors(), self.config.model_dump(mode="json"), self.encoder, self.tokenizer,
                self.config.train.keep_checkpoints)
        self.dist.barrier()
        self.last_checkpoint, self.last_saved_step = checkpoint_folder(self.run_dir, self.state.step), self.state.step
        return self.last_checkpoint

    def restore(self, checkpoint: LoadedCheckpoint) -> None:
        """Continue from ``checkpoint`` (of this run: the same modality, objective and encoder): its weights,
        optimizer moments, data position, RNG states and collapse alarms."""
        saved = checkpoint.run_config
        for section in ("modality", "objective", "model"):
            if getattr(saved, section) != getattr(self.config, section):
                raise CheckpointError(f"cannot resume {checkpoint.folder}: its '{section}' config differs from this run's")
        trainer_state, tensors = checkpoint.trainer_state()
        check_weights(self.objective.state_dict(), checkpoint.weights, f"{checkpoint.folder}/model.safetensors")
        try:
            set_state_dict(self.objective, self.optimizer, model_state_dict=checkpoint.weights,
                           optim_state_dict=optimizer_state_from(tensors, trainer_state["optimizer"]),
                           options=StateDictOptions(full_state_dict=True))
            self.state = TrainState(**trainer_state["state"])
            alarms = trainer_state.get("collapse_alarms", [])
            if not isinstance(alarms, list) or not all(isinstance(alarm, dict) and isinstance(alarm.get("step"), int)
                                                       for alarm in alarms):
                raise ValueError("collapse_alarms is not a list of alarms")
            if self.collapse is not None:  # alarms raised before the checkpoint stay in the run's summary
                self.collapse.alarms = alarms
            restore_rng(tensors, trainer_state.get("python_rng"))
            self.last_checkpoint, self.last_saved_step = checkpoint.folder, self.state.step
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise CheckpointError(f"{checkpoint.folder}: trainer_state.json and optimizer.safetensors do not hold "
                                  f"this run's optimizer and data state ({type(exc).__name__}: {exc})") from None
        if self.dist.rank:
            torch.manual_seed(hash((self.config.train.seed, self.state.step, self.dist.rank)) & (2**63 - 1))
        if self.dist.is_main:
            self.metrics.truncate_after(self.state.step)

    # -- loop -------------------------------------------------------------------------------------
    def fit(self) -> dict[str, Any]:
        """Train until ``max_steps``, ``max_time`` or ``stop_after_steps``; returns the summary.

        SIGINT/SIGTERM: the step finishes, a checkpoint is saved, the summary is written marked
        ``interrupted`` and ``RunInterrupted`` is raised. ``train.max_nonfinite_steps`` skipped steps
        in a row: the summary is marked ``diverged`` and ``TrainingDiverged`` raised. Another rank that
        stops answering within ``train.dist_timeout``, or ends: ``RankLost``. The run folder is released
        whatever happens."""
        try:
            with StopRequests() as stop, self._reporting():
                return self._fit(stop)
        except RuntimeError as exc:
            if not (self.dist.enabled and peer_failure(exc)):
                raise
            raise RankLost(self._lost_rank_message(exc)) from None
        finally:
            self.close()

    @contextmanager
    def _reporting(self) -> Iterator[None]:
        """Send metrics.jsonl's records to ``train.report_to``'s trackers too (rank 0 writes both)."""
        if not (self.dist.is_main and self.config.train.report_to):
            yield
            return
        self.metrics.reporter = open_reporter(self.config.train.report_to, TrackedRun(self.run_dir, self.run_dir.name),
                                              self.config.model_dump(mode="json"), self.state.step)
        try:
            yield
        finally:
            self.metrics.reporter.close()

    def _fit(self, stop: StopRequests) -> dict[str, Any]:
        config = self.config.train
        start_step = self.state.step
        started = time.perf_counter()
        self.resources = ResourceTrace(settled_step=max(config.warmup_steps, start_step + config.eval_every))
        self.resources.sample(start_step, self.state.train_time)
        last_eval: dict[str, Any] = {}
        nonfinite_streak, stopped = 0, False
        timed = bool(config.max_time)  # a time budget: the bar counts its seconds, not the steps it will never reach
        bar = progress_bar(total=config.max_time if timed else config.max_steps,
                           initial=round(self._train_seconds(), 1) if timed else self.state.step,
                           disable=not (config.progress and self.dist.is_main), unit="s" if timed else "step",
                           desc=f"{self.modality.name}/{self.config.objective.name}")
        try:
            while self.state.step < config.max_steps:
                if config.stop_after_steps and self.state.step - start_step >= config.stop_after_steps:
                    break
                train_seconds = self._train_seconds()
                if config.max_time and train_seconds >= config.max_time:
                    break
                if self._stop_requested(stop):
                    stopped = True
                    break
                loss = self.step(train_seconds).loss
                rate = self.state.tokens / max(self.state.train_time, 1e-9)
                bar.update(round(self.state.train_time, 1) - bar.n if timed else 1)
                bar.set_postfix(step=self.state.step, loss=f"{loss:.3f}", tok_s=f"{rate:,.0f}")
                nonfinite_streak = 0 if math.isfinite(loss) else nonfinite_streak + 1
                if nonfinite_streak:
                    self._skip_step(nonfinite_streak)
                elif self.state.step % config.log_every == 0 and self.dist.is_main:
                    self.metrics.write({"step": self.state.step, "loss": loss, "lr": self.optimizer.param_groups[0]["lr"],
                                        "tokens": self.state.tokens, "tokens_per_s": rate,
                                        **self.resources.sample(self.state.step, self.state.train_time)})
                if self.state.step % config.eval_every == 0:
                    last_eval = self._evaluate_and_log()
                if self.state.step % config.save_every == 0:
                    self.save()
        except KeyboardInterrupt:  # a second signal, or one outside the step boundary
            bar.close()
            self._stop(signal.SIGINT, last_eval, started, save=not self._in_step)
        except TrainingDiverged:
            bar.close()
            self._write_summary(last_eval, started, "diverged")
            raise
        bar.close()
        if stopped:
            self._stop(stop.signum or signal.SIGTERM, last_eval, started)
        if not last_eval or last_eval.get("step") != self.state.step:
            last_eval = self._evaluate_and_log()
        if self.state.step != self.last_saved_step:
            self.save()
        summary = self._write_summary(last_eval, started, "completed")
        self.dist.barrier()
        return summary

    def _lost_rank_message(self, exc: RuntimeError) -> str:
        """One line for a collective that failed: the timeout, gloo's reason, the checkpoint on disk (which only
        rank 0 writes, so every rank reads ``latest.json``) and how to continue."""
        cause = str(exc).splitlines()[0].rpartition("] ")[2]  # gloo's message without its source location
        saved = resolve_checkpoint(self.run_dir) if resume_point(self.run_dir) else "none written"
        return (f"rank {self.dist.rank}: lost contact with another rank after step {self.state.step} (no answer "
                f"within train.dist_timeout = {self.config.train.dist_timeout:g} s, or it ended: {cause}); last "
                f"finished checkpoint: {saved}; continue with: polymask train --resume {self.run_dir}")

    def _stop_requested(self, stop: StopRequests) -> bool:
        """Whether a stop signal arrived, agreed on by every rank so that all stop at the same step."""
        if not self.dist.enabled:
            return stop.requested
        return self.dist.sum([float(stop.requested)], self.device)[0] > 0

    def _skip_step(self, streak: int) -> None:
        """Count a step whose loss or gradient was not finite (no update was made); stop after a streak."""
        self.state.skipped_steps += 1
        if self.dist.is_main:
            self.metrics.write({"step": self.state.step, "loss": None, "skipped": "non-finite loss or gradient"})
        if streak >= self.config.train.max_nonfinite_steps:
            first = self.state.step - streak + 1
            raise TrainingDiverged(
                f"non-finite loss or gradient at steps {first}-{self.state.step} ({streak} in a row, no update made); "
                f"stopped. Last finite checkpoint: {self.last_checkpoint or 'none written'}; "
                f"lower train.lr or set train.grad_clip")

    def _stop(self, signum: int, last_eval: dict[str, Any], started: float, save: bool = True) -> None:
        """Save the last finished step, write the summary marked interrupted, raise ``RunInterrupted``."""
        if save and self.state.step > max(self.last_saved_step, 0):
            self.save()
        self._write_summary(last_eval, started, "interrupted")
        saved = f"checkpoint {self.last_checkpoint}" if self.last_checkpoint else "no checkpoint saved"
        raise RunInterrupted(f"{signal_name(signum)}: stopped at step {self.state.step} ({saved}); "
                             f"continue with: polymask train --resume {self.run_dir}", exit_code(signum))

    def _write_summary(self, last_eval: dict[str, Any], started: float, status: str) -> dict[str, Any]:
        """On rank 0: the corpus' skipped records copied into the run folder, the run facts saved as summary.json
        and printed; returns them (other ranks: an empty dict)."""
        if not self.dist.is_main:
            return {}
        wall_time = time.perf_counter() - started
        skipped_file = self.run_dir / "skipped_records.jsonl"
        if self.skipped_file != skipped_file:
            copy_skipped(self.skipped_file, skipped_file, self.renamed_sources)
        facts = self.run_facts(last_eval, wall_time, status)
        write_summary(self.run_dir / "summary.json", facts)
        return facts

    def run_facts(self, last_eval: dict[str, Any], wall_time: float, status: str = "completed") -> dict[str, Any]:
        """The run summary, in summary.json's order: the run, its steps, tokens and clocks, its corpus, its last
        evaluation, collapse verdict, checkpoint and memory. ``last_eval``: the latest ``evaluate()`` result;
        ``wall_time``: seconds of this invocation; ``status``: completed, interrupted or diverged."""
        state, report, collapse = self.state, self.corpus_report, self.collapse
        return {
            "status": status,
            "run_dir": str(self.run_dir),
            "modality": self.modality.name,
            "objective": self.config.objective.name,
            "parameters": sum(p.numel() for p in self.encoder.parameters()),
            "device": str(self.device),
            "precision": precision_used(self.device, self.config.train.precision),
            "steps": state.step,
            "skipped_steps": state.skipped_steps,
            "epochs": self.epochs_done(),
            "tokens": state.tokens,
            "tokens_per_s": round(state.tokens / max(state.train_time, 1e-9), 1),
            "padding_fraction": round(1 - state.tokens / max(state.padded_tokens, 1), 4),
            "train_time_s": round(state.train_time, 2),
            "wall_time_s": round(wall_time, 2),
            "time_note": TIME_NOTE,
            "records": report.records,
            "skipped_records": report.skipped,
            "skipped_examples": report.skipped_examples,
            "skipped_by_reason": report.skipped_by_reason,
            "changed_by_step": report.changed_by_step,
            "held_out_records": report.held_out,
            "held_out_by_file": report.held_out_by_file,
            "unknown_tokens": report.unknown_tokens,
            "train_sequences": report.train_sequences,
            "valid_sequences": report.valid_sequences,
            "best_val_loss": state.best_val_loss,
            "final_val_loss": last_eval.get("val_loss"),
            "final_val_accuracy": last_eval.get("val_accuracy"),
            "final_val_mask_accuracy": last_eval.get("val_mask_accuracy", last_eval.get("val_accuracy")),
            "unigram_accuracy": None if collapse is None else collapse.unigram,
            "final_val_rank": last_eval.get("val_rank"),
            "collapsed": None if collapse is None else collapse.collapsed,
            "checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None,
            "checkpoint_step": self.last_saved_step if self.last_saved_step >= 0 else None,
            "collapse": None if collapse is None else collapse.report(),
            "memory": self.resources.report(),
        }

    def epochs_done(self) -> float:
        """Epochs of training data consumed (whole epochs only when streaming: the length is unknown)."""
        if isinstance(self.batches, IndexedBatches):
            return round(self.state.epoch + self.state.batch_index / max(1, self.batches.batches_per_epoch(self.state)), 3)
        return float(self.state.epoch)

    def _train_seconds(self) -> float:
        """Training time so far, all invocations of the run (rank 0's clock, agreed on by every rank so all
        stop together and follow one schedule); 0 without a ``max_time`` (no clock, no synchronisation)."""
        if not self.config.train.max_time:
            return 0.0
        return self.dist.sum([self.state.train_time if self.dist.is_main else 0.0], self.device)[0]

    def _evaluate_and_log(self) -> dict[str, Any]:
        result = {"step": self.state.step, **self.evaluate()}
        if "val_loss" in result and (self.state.best_val_loss is None or result["val_loss"] < self.state.best_val_loss):
            self.state.best_val_loss = result["val_loss"]
        if self.collapse is not None and "val_accuracy" in result:
            result["unigram_accuracy"] = self.collapse.unigram
            accuracy = result.get("val_mask_accuracy", result["val_accuracy"])  # a kept token can be copied
            warnings = self.collapse.check(self.state.step, accuracy, result["val_rank"])
            if self.dist.is_main:
                for line in warnings:
                    tqdm_write(f"polymask: warning: {line}")
        if self.dist.is_main:
            self.metrics.write(result)
        return result


def train(config: RunConfig | dict[str, Any] | None = None, *, data: Dataset | None = None,
          resume: str | Path | LoadedCheckpoint | None = None, overwrite: bool = False) -> dict[str, Any]:
    """Pretrain an encoder; returns the run summary (also written to ``<out>/summary.json``).

    ``config``: a ``RunConfig`` or a raw dict (validated); with ``resume`` and no config, the
    checkpoint's own config is used. ``data``: a ``datasets.Dataset`` instead of corpus files.
    A folder that already holds a run is refused unless ``resume`` (a run or checkpoint folder, or a checkpoint
    already read with ``read_checkpoint``) or ``overwrite`` (its run files are removed first).
    ``resume="auto"``: resume the config's ``out``
    folder from its latest checkpoint if it has one, return a finished run's summary untouched, and
    otherwise start the run (safe in a job script that is run again and again).
    Under ``torchrun`` the summary is returned on rank 0 (other ranks return an empty dict).
    """
    existing: Existing = "overwrite" if overwrite else "refuse"
    if config is not None and not isinstance(config, RunConfig):
        config = build_run_config(config)
    if isinstance(resume, (str, Path)) and str(resume) == "auto":
        if config is None:
            raise ConfigError("resume='auto' needs the run's config (the out folder to look in)")
        finished = finished_summary(config.out_dir(), config.train.max_steps)
        if finished is not None:
            print(f"polymask: {config.out_dir()} is finished (step {finished['steps']:,} of {config.train.max_steps:,}); "
                  f"nothing to do")
            return finished
        resume = resume_point(config.out_dir())
        if resume is None:
            existing = "overwrite"  # files without a checkpoint: a start that saved nothing, begun again
    checkpoint = resume if isinstance(resume, LoadedCheckpoint) or resume is None else read_checkpoint(Path(resume))
    run_dir, tokenizer = None, None
    if checkpoint is not None:
        run_dir = checkpoint.run_dir()
        tokenizer = checkpoint.tokenizer  # the one it was trained with, whatever the built-in is now
        if config is None:
            config = checkpoint.run_config.model_copy(deep=True)
            config.train.stop_after_steps = None  # a per-invocation limit, not part of the run (assignment validated)
    if config is None:
        raise ValueError("train() needs a config (or resume=DIR)")
    trainer = Trainer(config, data=data, run_dir=run_dir, tokenizer=tokenizer,
                      existing="resume" if checkpoint is not None else existing)
    if checkpoint is not None:
        try:
            trainer.restore(checkpoint)
        except BaseException:
            trainer.close()
            raise
    return trainer.fit()
