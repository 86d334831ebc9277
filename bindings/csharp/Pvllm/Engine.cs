using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Runtime.ExceptionServices;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Pvllm
{
    /// <summary>
    /// A pvllm engine: a loaded model, its tokenizer and KV cache.
    ///
    /// Threading follows pvllm.h: Submit, Poll, PollRequest, Wait, Abort,
    /// Detach, GetStats, Tokenize and Detokenize may be called from any thread,
    /// also while another thread is inside Step. Step is serialised here with a
    /// lock, so several threads (e.g. several Stream or GenerateAsync loops) may
    /// drive the same engine.
    ///
    /// The library keeps each request's outputs apart: requests started with
    /// Stream / GenerateAsync are submitted with Delivery.PerRequest and read
    /// with PollRequest, so Poll (which returns every other request's outputs)
    /// never takes theirs. Dispose waits for calls in flight (the SafeHandle
    /// counts them) and is safe to call twice; any later call throws
    /// ObjectDisposedException.
    /// </summary>
    public sealed partial class Engine : IDisposable
    {
        // How long a Stream loop waits for another thread's step before it
        // tries to step itself.
        private const int StreamWaitMs = 20;

        private readonly EngineHandle handle;

        // Held across pvllm_step: one thread steps at a time; a Stream loop
        // that finds it taken waits for its own outputs instead.
        private readonly object stepLock = new object();

        private Engine(EngineHandle handle)
        {
            this.handle = handle;
        }

        // ---- Versions ---------------------------------------------------------

        /// <summary>The loaded library's version, "MAJOR.MINOR.PATCH".</summary>
        public static string Version => Utf8.FromNative(NativeMethods.pvllm_version());

        /// <summary>The loaded library's MAJOR * 10000 + MINOR * 100 + PATCH.</summary>
        public static uint VersionNumber => NativeMethods.pvllm_version_number();

        /// <summary>The loaded library's ABI version (its SONAME number).</summary>
        public static uint AbiVersion => NativeMethods.pvllm_abi_version();

        /// <summary>The ABI version this binding was written against.</summary>
        public static uint BindingAbiVersion => NativeMethods.AbiVersion;

        // ---- Lifetime ---------------------------------------------------------

        /// <summary>
        /// Loads the model and tokenizer and allocates the KV pool.
        /// Throws PvllmException: InvalidArgument, NotFound, IoError, CorruptModel,
        /// Unsupported, TokenizerError, OutOfMemory.
        /// </summary>
        public static Engine Create(EngineOptions options)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            Library.CheckAbi();
            using (var scope = new NativeScope())
            {
                NativeMethods.pvllm_engine_params p = options.ToNative(scope);
                Exception callbackError = null;
                NativeMethods.pvllm_progress_fn callback = null;
                Action<float, string> progress = options.Progress;
                if (progress != null)
                {
                    // An exception must not unwind through the library's frames:
                    // keep the first one and rethrow it after create returns.
                    callback = (fraction, stage, userData) =>
                    {
                        if (callbackError != null) return;
                        try { progress(fraction, Utf8.FromNative(stage)); }
                        catch (Exception e) { callbackError = e; }
                    };
                    p.progress = Marshal.GetFunctionPointerForDelegate(callback);
                }
                EngineHandle engine;
                IntPtr error;
                PvllmStatus status = NativeMethods.pvllm_engine_create(ref p, out engine, out error);
                GC.KeepAlive(callback);
                PvllmException.Check(status, error);
                if (callbackError != null)
                {
                    engine.Dispose();
                    ExceptionDispatchInfo.Capture(callbackError).Throw();
                }
                return new Engine(engine);
            }
        }

        /// <summary>Frees the engine; pending outputs are dropped. Safe to call more than once.</summary>
        public void Dispose()
        {
            handle.Dispose();
            // The library calls no handler any more: free what they held.
            foreach (HandlerState state in liveHandlers.Keys)
            {
                if (HandlerDone(state)) state.Handle.Free();
            }
        }

        public bool IsDisposed => handle.IsClosed;

        // ---- Requests -----------------------------------------------------------

        /// <summary>
        /// Queues a request and returns its id (never 0); its outputs come from
        /// Poll (or PollRequest) once Step runs. Thread-safe. Throws
        /// PvllmException (InvalidArgument, TokenizerError); a failed submit
        /// changes nothing.
        /// </summary>
        public ulong Submit(Request request) => Submit(request, Delivery.Shared);

        /// <summary>
        /// Submit, choosing who may take the request's outputs: with
        /// Delivery.PerRequest only PollRequest / Wait on its id, never Poll.
        /// </summary>
        public ulong Submit(Request request, Delivery delivery)
        {
            if (request == null) throw new ArgumentNullException(nameof(request));
            ThrowIfDisposed();
            using (var scope = new NativeScope())
            {
                NativeMethods.pvllm_request r = request.ToNative(scope, delivery);
                ulong id;
                IntPtr error;
                PvllmException.Check(NativeMethods.pvllm_submit(handle, ref r, out id, out error), error);
                return id;
            }
        }

        /// <summary>Queues a text prompt (with the tokenizer's special tokens, such as BOS) and returns its id.</summary>
        public ulong Submit(string prompt, SamplingParams sampling = null)
            => Submit(new Request(prompt, sampling));

        /// <summary>
        /// Submits `request` now with an on_output handler and returns its outputs
        /// as an asynchronous stream (see AsyncOutputStream): <c>await foreach</c>
        /// on C# 8 and later. Thread-safe; a bad request throws PvllmException
        /// here. Since 0.5.
        /// </summary>
        public AsyncOutputStream StreamAsync(Request request) => StreamAsync(request, CancellationToken.None);

        /// <summary>
        /// As StreamAsync(request), the stream bound to `cancellationToken`:
        /// <c>await foreach (Output o in engine.StreamAsync(request, token))</c>
        /// aborts the request once the token is cancelled, and the loop throws
        /// OperationCanceledException. Since 0.5.
        /// </summary>
        public AsyncOutputStream StreamAsync(Request request, CancellationToken cancellationToken)
        {
            if (request == null) throw new ArgumentNullException(nameof(request));
            ThrowIfDisposed();
            var state = new HandlerState { Owner = this };
            state.Handle = GCHandle.Alloc(state);
            try
            {
                using (var scope = new NativeScope())
                {
                    NativeMethods.pvllm_request r = request.ToNative(scope, Delivery.PerRequest);
                    r.on_output = HandlerState.CallbackPointer;
                    r.on_output_user_data = GCHandle.ToIntPtr(state.Handle);
                    liveHandlers[state] = true;
                    ulong id;
                    IntPtr error;
                    PvllmException.Check(NativeMethods.pvllm_submit(handle, ref r, out id, out error), error);
                    state.RequestId = id;
                }
            }
            catch
            {
                bool unused;
                liveHandlers.TryRemove(state, out unused);
                state.Handle.Free();
                throw;
            }
            return new AsyncOutputStream(this, state, cancellationToken);
        }

        // The handlers the library may still call; their GCHandles are freed
        // with their last output, or here when the engine goes first.
        private readonly ConcurrentDictionary<HandlerState, bool> liveHandlers =
            new ConcurrentDictionary<HandlerState, bool>();

        internal bool HandlerDone(HandlerState state)
        {
            bool unused;
            return liveHandlers.TryRemove(state, out unused);
        }

        // An awaiting AsyncOutputEnumerator with nothing queued: step, or wait
        // for the thread that is stepping.
        internal void StepForHandler(HandlerState state)
        {
            if (!state.Outputs.IsEmpty) return;
            if (!Monitor.TryEnter(stepLock))
            {
                state.Arrived.Wait(StreamWaitMs);
                return;
            }
            try
            {
                ThrowIfDisposed();
                StepLocked();
            }
            catch (PvllmException)
            {
                // The failed requests end with FinishReason.Error outputs.
            }
            finally
            {
                Monitor.Exit(stepLock);
            }
        }

        internal void AbortQuietly(ulong requestId)
        {
            try
            {
                Abort(requestId);
            }
            catch (PvllmException e) when (e.Status == PvllmStatus.NotFound)
            {
            }
            catch (ObjectDisposedException)
            {
            }
        }

        /// <summary>
        /// Aborts a request in any state; its samples end with FinishReason.Abort.
        /// Thread-safe. Throws PvllmException NotFound for an unknown or finished id.
        /// </summary>
        public void Abort(ulong requestId)
        {
            ThrowIfDisposed();
            IntPtr error;
            PvllmException.Check(NativeMethods.pvllm_abort(handle, requestId, out error), error);
        }

        /// <summary>
        /// Runs one scheduler iteration and returns how many requests are not yet
        /// finished. Calls from several threads run one after the other.
        /// </summary>
        public int Step()
        {
            ThrowIfDisposed();
            lock (stepLock)
            {
                return StepLocked();
            }
        }

        /// <summary>
        /// Takes up to `maxEvents` pending outputs (0 = all) of the requests
        /// submitted with Delivery.Shared (Submit), so never those of a Stream /
        /// GenerateAsync. Thread-safe; each output is delivered once.
        /// </summary>
        public IReadOnlyList<Output> Poll(int maxEvents = 0)
        {
            if (maxEvents < 0) throw new ArgumentOutOfRangeException(nameof(maxEvents));
            ThrowIfDisposed();
            OutputBatchHandle batch;
            IntPtr error;
            PvllmException.Check(NativeMethods.pvllm_poll(handle, (UIntPtr)(uint)maxEvents, out batch, out error), error);
            return ReadBatch(batch);
        }

        /// <summary>
        /// Takes up to `maxEvents` pending outputs (0 = all) of one request,
        /// whatever its delivery, oldest first; empty while it runs and has made
        /// nothing new. Never blocks (see Wait). Thread-safe. Throws
        /// PvllmException NotFound once the request is over and its last output
        /// taken, or after Detach.
        /// </summary>
        public IReadOnlyList<Output> PollRequest(ulong requestId, int maxEvents = 0)
        {
            if (maxEvents < 0) throw new ArgumentOutOfRangeException(nameof(maxEvents));
            return PollRequestList(requestId, maxEvents);
        }

        private List<Output> PollRequestList(ulong requestId, int maxEvents)
        {
            ThrowIfDisposed();
            OutputBatchHandle batch;
            IntPtr error;
            PvllmException.Check(NativeMethods.pvllm_poll_request(handle, requestId, (UIntPtr)(uint)maxEvents,
                                                                  out batch, out error), error);
            return ReadBatch(batch);
        }

        /// <summary>
        /// Blocks until the request has outputs to take (or its last output was
        /// taken elsewhere while this waited): true; or until `timeoutMs` passes
        /// (Timeout.Infinite = no limit): false. Outputs appear when a Step
        /// returns, so another thread must be stepping. Thread-safe. Throws
        /// PvllmException NotFound as PollRequest.
        /// </summary>
        public bool Wait(ulong requestId, int timeoutMs = Timeout.Infinite)
        {
            if (timeoutMs < Timeout.Infinite) throw new ArgumentOutOfRangeException(nameof(timeoutMs));
            ThrowIfDisposed();
            IntPtr error;
            PvllmStatus status = NativeMethods.pvllm_wait(handle, requestId, timeoutMs, out error);
            if (status == PvllmStatus.Timeout)
            {
                NativeMethods.pvllm_error_free(error);
                return false;
            }
            PvllmException.Check(status, error);
            return true;
        }

        /// <summary>
        /// Stops delivering a request's outputs: those pending are dropped now,
        /// later ones as they come. The request runs on; Abort it first to stop
        /// it. Thread-safe. Throws PvllmException NotFound as PollRequest.
        /// </summary>
        public void Detach(ulong requestId)
        {
            ThrowIfDisposed();
            IntPtr error;
            PvllmException.Check(NativeMethods.pvllm_detach(handle, requestId, out error), error);
        }

        // ---- Streaming ---------------------------------------------------------

        /// <summary>
        /// Submits `request` now (Delivery.PerRequest) and returns its outputs as
        /// they are generated, up to the one with RequestFinished. Enumerating
        /// reads the request's outputs from the library and, when none is
        /// waiting, steps the engine from the enumerating thread (or waits for
        /// the thread that is stepping); several streams may run at once on
        /// different threads, and an unread stream holds back only its own
        /// request. Leaving the loop early aborts the request and drops its
        /// remaining outputs.
        /// </summary>
        public IEnumerable<Output> Stream(Request request, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (request == null) throw new ArgumentNullException(nameof(request));
            ThrowIfDisposed();
            return Iterate(Submit(request, Delivery.PerRequest), cancellationToken);
        }

        /// <summary>
        /// Streams the outputs of a request submitted earlier with Submit, from
        /// the first one Poll has not taken. `numSamples` is not needed any more
        /// (the library marks the request's last output) and only checked.
        /// </summary>
        public IEnumerable<Output> Stream(ulong requestId, int numSamples = 1,
                                         CancellationToken cancellationToken = default(CancellationToken))
        {
            if (numSamples < 1) throw new ArgumentOutOfRangeException(nameof(numSamples));
            ThrowIfDisposed();
            return Iterate(requestId, cancellationToken);
        }

        /// <summary>
        /// Generates `request` to completion on a thread-pool thread and returns
        /// every sample's tokens and text. The request is submitted before this
        /// returns (a bad request gives a faulted task); cancelling aborts it.
        /// A sample the engine failed ends with FinishReason.Error and its
        /// ErrorMessage.
        /// </summary>
        public Task<Generation> GenerateAsync(Request request,
                                              CancellationToken cancellationToken = default(CancellationToken))
        {
            IEnumerable<Output> outputs;
            try
            {
                outputs = Stream(request, cancellationToken);
            }
            catch (Exception e)
            {
                return Task.FromException<Generation>(e);
            }
            int numSamples = request.NumSamples;
            // CancellationToken.None: the loop must start to abort the request
            // it submitted; it observes the token itself.
            return Task.Run(() => Collect(outputs, numSamples), CancellationToken.None);
        }

        /// <summary>GenerateAsync on the calling thread.</summary>
        public Generation Generate(Request request)
            => Collect(Stream(request), request.NumSamples);

        // ---- Statistics, tokenizer, models -------------------------------------

        /// <summary>A snapshot taken after the latest step. Thread-safe.</summary>
        public EngineStats GetStats()
        {
            ThrowIfDisposed();
            var s = NativeStruct.Init<NativeMethods.pvllm_stats>(NativeMethods.pvllm_stats_init);
            IntPtr error;
            PvllmException.Check(NativeMethods.pvllm_get_stats(handle, ref s, out error), error);
            return new EngineStats(s);
        }

        /// <summary>Encodes `text` with the model's tokenizer. Thread-safe.</summary>
        public int[] Tokenize(string text, bool addBos = false)
        {
            if (text == null) throw new ArgumentNullException(nameof(text));
            ThrowIfDisposed();
            byte[] utf8 = Utf8.ToNulTerminated(text);
            return IdBuffer.Read(utf8, (int[] ids, UIntPtr capacity, out UIntPtr count, out IntPtr error) =>
                NativeMethods.pvllm_tokenize(handle, utf8, addBos ? (byte)1 : (byte)0, ids, capacity,
                    out count, out error));
        }

        /// <summary>Decodes token ids into text. Thread-safe. InvalidArgument for an id outside the vocabulary.</summary>
        public string Detokenize(IReadOnlyList<int> ids)
        {
            if (ids == null) throw new ArgumentNullException(nameof(ids));
            ThrowIfDisposed();
            var copy = new int[ids.Count];
            for (int i = 0; i < copy.Length; i++) copy[i] = ids[i];
            return TextBuffer.Read(16 * copy.Length + 16,
                (byte[] text, UIntPtr capacity, out UIntPtr length, out IntPtr error) =>
                    NativeMethods.pvllm_detokenize(handle, copy, (UIntPtr)(uint)copy.Length, text, capacity,
                        out length, out error));
        }

        /// <summary>What Create(options) would need, read from the model's config and tensor table.</summary>
        public static MemoryEstimate EstimateMemory(EngineOptions options)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            using (var scope = new NativeScope())
            {
                NativeMethods.pvllm_engine_params p = options.ToNative(scope);
                var e = NativeStruct.Init<NativeMethods.pvllm_memory_estimate>(NativeMethods.pvllm_memory_estimate_init);
                IntPtr error;
                PvllmException.Check(NativeMethods.pvllm_estimate_memory(ref p, ref e, out error), error);
                return new MemoryEstimate(e);
            }
        }

        // ---- Internals -----------------------------------------------------------

        private void ThrowIfDisposed()
        {
            if (handle.IsClosed) throw new ObjectDisposedException(nameof(Engine));
        }

        private int StepLocked()
        {
            int unfinished;
            IntPtr error;
            PvllmException.Check(NativeMethods.pvllm_step(handle, out unfinished, out error), error);
            return unfinished;
        }

        // Copies every output out of a batch and frees it.
        private static List<Output> ReadBatch(OutputBatchHandle batch)
        {
            using (batch)
            {
                ulong count = NativeMethods.pvllm_output_batch_size(batch).ToUInt64();
                var outputs = new List<Output>((int)count);
                for (ulong i = 0; i < count; i++)
                {
                    outputs.Add(Output.FromNative(NativeMethods.pvllm_output_batch_get(batch, (UIntPtr)i)));
                }
                return outputs;
            }
        }

        private IEnumerable<Output> Iterate(ulong requestId, CancellationToken cancellationToken)
        {
            bool over = false;
            try
            {
                while (!over)
                {
                    foreach (Output output in Next(requestId, cancellationToken))
                    {
                        over = over || output.RequestFinished;
                        yield return output;
                    }
                }
            }
            finally
            {
                if (!over) Abandon(requestId);
            }
        }

        // The request's next outputs, at least one: what the library holds for
        // it, else what a step makes, this thread's or another's. Throws when
        // the request can make no more.
        private List<Output> Next(ulong requestId, CancellationToken cancellationToken)
        {
            while (true)
            {
                cancellationToken.ThrowIfCancellationRequested();
                List<Output> outputs = TakeOwn(requestId);
                if (outputs.Count > 0) return outputs;
                if (!Monitor.TryEnter(stepLock))
                {
                    // Another thread is stepping: its step may bring ours.
                    OwnRequest(requestId, () => Wait(requestId, StreamWaitMs));
                    continue;
                }
                PvllmException stepError = null;
                try
                {
                    ThrowIfDisposed();
                    StepLocked();
                }
                catch (PvllmException e)
                {
                    // The failed requests end with FinishReason.Error outputs and
                    // the others keep their work, so only fail if this one got none.
                    stepError = e;
                }
                finally
                {
                    Monitor.Exit(stepLock);
                }
                outputs = TakeOwn(requestId);
                if (outputs.Count > 0) return outputs;
                if (stepError != null) throw stepError;
            }
        }

        private List<Output> TakeOwn(ulong requestId)
            => OwnRequest(requestId, () => PollRequestList(requestId, 0));

        // Runs a per-request call of a Stream loop; NotFound means the stream
        // cannot finish: say why.
        private static T OwnRequest<T>(ulong requestId, Func<T> call)
        {
            try
            {
                return call();
            }
            catch (PvllmException e) when (e.Status == PvllmStatus.NotFound)
            {
                throw new InvalidOperationException(
                    $"request {requestId} has no more outputs: it is unknown to the engine, " +
                    "or another consumer (Poll, PollRequest, Detach) took its last one", e);
            }
        }

        // The consumer left early: abort the request and drop its remaining
        // outputs in the library.
        private void Abandon(ulong requestId)
        {
            if (handle.IsClosed) return;
            try
            {
                Abort(requestId);
            }
            catch (PvllmException e) when (e.Status == PvllmStatus.NotFound)
            {
                // It finished in the library; its last outputs are still there.
            }
            catch (ObjectDisposedException)
            {
                return;
            }
            try
            {
                Detach(requestId);
            }
            catch (PvllmException e) when (e.Status == PvllmStatus.NotFound)
            {
            }
            catch (ObjectDisposedException)
            {
            }
        }

        private static Generation Collect(IEnumerable<Output> outputs, int numSamples)
        {
            var tokens = new List<int>[numSamples];
            var texts = new StringBuilder[numSamples];
            var logprobs = new List<TokenLogprobs>[numSamples];
            var reasons = new FinishReason[numSamples];
            var errors = new string[numSamples];
            var scores = new double[numSamples];
            IReadOnlyList<TokenLogprobs> promptLogprobs = null;
            RequestMetrics metrics = null;
            ulong requestId = 0;
            for (int i = 0; i < numSamples; i++)
            {
                tokens[i] = new List<int>();
                texts[i] = new StringBuilder();
            }
            foreach (Output o in outputs)
            {
                requestId = o.RequestId;
                int i = o.SampleIndex;
                tokens[i].AddRange(o.TokenIds);
                texts[i].Append(o.Text);
                if (o.Logprobs != null) (logprobs[i] ?? (logprobs[i] = new List<TokenLogprobs>())).AddRange(o.Logprobs);
                if (o.PromptLogprobs != null) promptLogprobs = o.PromptLogprobs;
                if (o.Metrics != null) metrics = o.Metrics;
                if (o.Score != 0) scores[i] = o.Score;
                if (o.IsFinished)
                {
                    reasons[i] = o.FinishReason;
                    errors[i] = o.ErrorMessage;
                }
            }
            var samples = new Sample[numSamples];
            for (int i = 0; i < numSamples; i++)
            {
                samples[i] = new Sample(i, tokens[i], texts[i].ToString(), reasons[i], logprobs[i], errors[i] ?? "",
                                        scores[i]);
            }
            return new Generation(requestId, samples, promptLogprobs, metrics);
        }
    }
}
