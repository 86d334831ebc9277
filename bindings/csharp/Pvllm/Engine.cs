using System;
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
    /// Threading follows pvllm.h: Submit, Poll, Abort, GetStats, Tokenize and
    /// Detokenize may be called from any thread, also while another thread is
    /// inside Step. Step is serialised here with a lock, so several threads
    /// (e.g. several Stream or GenerateAsync loops) may drive the same engine.
    ///
    /// Outputs of requests started with Stream / GenerateAsync are routed to
    /// them, whoever polls; Poll returns the outputs of every other request.
    /// Dispose waits for calls in flight (the SafeHandle counts them) and is
    /// safe to call twice; any later call throws ObjectDisposedException.
    /// </summary>
    public sealed class Engine : IDisposable
    {
        private readonly EngineHandle handle;

        // Held across pvllm_step: one thread steps at a time.
        private readonly object stepLock = new object();

        // Held across poll + routing, and across submit + subscribe in Stream,
        // so an event is never routed before its request's subscription exists.
        private readonly object dispatchLock = new object();
        private readonly Dictionary<ulong, Subscription> subscriptions = new Dictionary<ulong, Subscription>();
        // Outputs of unsubscribed requests that a Stream's loop polled; the
        // next Poll returns them first.
        private readonly List<Output> unclaimed = new List<Output>();

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
            CheckAbi();
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
        }

        public bool IsDisposed => handle.IsClosed;

        // ---- Requests -----------------------------------------------------------

        /// <summary>
        /// Queues a request and returns its id (never 0); its outputs come from
        /// Poll once Step runs. Thread-safe. Throws PvllmException
        /// (InvalidArgument, TokenizerError); a failed submit changes nothing.
        /// </summary>
        public ulong Submit(Request request)
        {
            if (request == null) throw new ArgumentNullException(nameof(request));
            ThrowIfDisposed();
            using (var scope = new NativeScope())
            {
                NativeMethods.pvllm_request r = request.ToNative(scope);
                ulong id;
                IntPtr error;
                PvllmException.Check(NativeMethods.pvllm_submit(handle, ref r, out id, out error), error);
                return id;
            }
        }

        /// <summary>Queues a text prompt (BOS prepended) and returns its id.</summary>
        public ulong Submit(string prompt, SamplingParams sampling = null)
            => Submit(new Request(prompt, sampling));

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
        /// Takes up to `maxEvents` pending outputs (0 = all) of requests that no
        /// Stream / GenerateAsync is consuming. Thread-safe; each output is
        /// delivered once.
        /// </summary>
        public IReadOnlyList<Output> Poll(int maxEvents = 0)
        {
            if (maxEvents < 0) throw new ArgumentOutOfRangeException(nameof(maxEvents));
            ThrowIfDisposed();
            lock (dispatchLock)
            {
                var result = new List<Output>();
                int fromUnclaimed = maxEvents == 0 ? unclaimed.Count : Math.Min(maxEvents, unclaimed.Count);
                result.AddRange(unclaimed.GetRange(0, fromUnclaimed));
                unclaimed.RemoveRange(0, fromUnclaimed);
                if (maxEvents == 0 || result.Count < maxEvents)
                {
                    int rest = maxEvents == 0 ? 0 : maxEvents - result.Count;
                    result.AddRange(PollAndRouteLocked(rest));
                }
                return result;
            }
        }

        // ---- Streaming ---------------------------------------------------------

        /// <summary>
        /// Submits `request` now and returns its outputs as they are generated,
        /// until every sample has finished. Enumerating drives the engine (steps
        /// and polls) from the enumerating thread; several streams may run at
        /// once on different threads. Leaving the loop early aborts the request.
        /// </summary>
        public IEnumerable<Output> Stream(Request request, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (request == null) throw new ArgumentNullException(nameof(request));
            ThrowIfDisposed();
            Subscription sub;
            lock (dispatchLock)
            {
                ulong id = Submit(request);
                sub = new Subscription(id, request.NumSamples);
                subscriptions.Add(id, sub);
            }
            return Iterate(sub, cancellationToken);
        }

        /// <summary>
        /// Streams the outputs of a request submitted earlier with Submit, whose
        /// outputs Poll has not taken yet; `numSamples` is its n.
        /// </summary>
        public IEnumerable<Output> Stream(ulong requestId, int numSamples = 1,
                                         CancellationToken cancellationToken = default(CancellationToken))
        {
            if (numSamples < 1) throw new ArgumentOutOfRangeException(nameof(numSamples));
            ThrowIfDisposed();
            Subscription sub;
            lock (dispatchLock)
            {
                if (subscriptions.ContainsKey(requestId))
                    throw new InvalidOperationException($"request {requestId} is already being streamed");
                sub = new Subscription(requestId, numSamples);
                subscriptions.Add(requestId, sub);
                for (int i = 0; i < unclaimed.Count;)
                {
                    if (unclaimed[i].RequestId == requestId)
                    {
                        sub.Deliver(unclaimed[i]);
                        unclaimed.RemoveAt(i);
                    }
                    else
                    {
                        i++;
                    }
                }
                if (sub.Remaining == 0) subscriptions.Remove(requestId);
            }
            return Iterate(sub, cancellationToken);
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
            // Every token covers at least one byte; BOS and a dummy-prefix
            // token may come on top, so this is usually big enough at once.
            var ids = new int[utf8.Length + 2];
            while (true)
            {
                UIntPtr needed;
                IntPtr error;
                PvllmStatus status = NativeMethods.pvllm_tokenize(handle, utf8, addBos ? (byte)1 : (byte)0,
                    ids, (UIntPtr)(uint)ids.Length, out needed, out error);
                int count = checked((int)needed.ToUInt64());
                if (status == PvllmStatus.BufferTooSmall && count > ids.Length)
                {
                    NativeMethods.pvllm_error_free(error);
                    ids = new int[count];
                    continue;
                }
                PvllmException.Check(status, error);
                Array.Resize(ref ids, count);
                return ids;
            }
        }

        /// <summary>Decodes token ids into text. Thread-safe. InvalidArgument for an id outside the vocabulary.</summary>
        public string Detokenize(IReadOnlyList<int> ids)
        {
            if (ids == null) throw new ArgumentNullException(nameof(ids));
            ThrowIfDisposed();
            var copy = new int[ids.Count];
            for (int i = 0; i < copy.Length; i++) copy[i] = ids[i];
            var text = new byte[16 * copy.Length + 16];
            while (true)
            {
                UIntPtr length;
                IntPtr error;
                PvllmStatus status = NativeMethods.pvllm_detokenize(handle, copy, (UIntPtr)(uint)copy.Length,
                    text, (UIntPtr)(uint)text.Length, out length, out error);
                int count = checked((int)length.ToUInt64());
                if (status == PvllmStatus.BufferTooSmall && count + 1 > text.Length)
                {
                    NativeMethods.pvllm_error_free(error);
                    text = new byte[count + 1];
                    continue;
                }
                PvllmException.Check(status, error);
                return Encoding.UTF8.GetString(text, 0, count);
            }
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

        private static void CheckAbi()
        {
            uint abi = NativeMethods.pvllm_abi_version();
            if (abi != NativeMethods.AbiVersion)
            {
                throw new PvllmException(PvllmStatus.Unsupported,
                    $"libpvllm has ABI version {abi}, this binding needs {NativeMethods.AbiVersion}");
            }
        }

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

        // Polls the library; routes subscribed outputs, returns the others.
        // Caller holds dispatchLock.
        private List<Output> PollAndRouteLocked(int maxEvents)
        {
            var rest = new List<Output>();
            OutputBatchHandle batch;
            IntPtr error;
            PvllmStatus status = NativeMethods.pvllm_poll(handle, (UIntPtr)(uint)maxEvents, out batch, out error);
            PvllmException.Check(status, error);
            using (batch)
            {
                ulong count = NativeMethods.pvllm_output_batch_size(batch).ToUInt64();
                for (ulong i = 0; i < count; i++)
                {
                    Output output = Output.FromNative(NativeMethods.pvllm_output_batch_get(batch, (UIntPtr)i));
                    Subscription sub;
                    if (subscriptions.TryGetValue(output.RequestId, out sub))
                    {
                        sub.Deliver(output);
                        if (sub.Remaining == 0) subscriptions.Remove(output.RequestId);
                    }
                    else
                    {
                        rest.Add(output);
                    }
                }
            }
            return rest;
        }

        private void PollIntoSubscriptions()
        {
            lock (dispatchLock)
            {
                unclaimed.AddRange(PollAndRouteLocked(0));
            }
        }

        private IEnumerable<Output> Iterate(Subscription sub, CancellationToken cancellationToken)
        {
            bool completed = false;
            try
            {
                while (true)
                {
                    Output output;
                    while ((output = Take(sub)) != null) yield return output;
                    if (IsComplete(sub))
                    {
                        completed = true;
                        yield break;
                    }
                    cancellationToken.ThrowIfCancellationRequested();
                    Advance(sub);
                }
            }
            finally
            {
                if (!completed) Abandon(sub);
            }
        }

        // Makes progress for `sub`: takes what another thread's step produced,
        // otherwise steps once. Throws when the request can make no progress.
        private void Advance(Subscription sub)
        {
            lock (stepLock)
            {
                PollIntoSubscriptions();
                if (HasPending(sub)) return;
                ThrowIfDisposed();
                int unfinished = -1;
                PvllmException stepError = null;
                try
                {
                    unfinished = StepLocked();
                }
                catch (PvllmException e)
                {
                    // The failed requests end with FinishReason.Error events;
                    // the others keep their work, so only fail if `sub` got none.
                    stepError = e;
                }
                PollIntoSubscriptions();
                if (HasPending(sub)) return;
                if (stepError != null) throw stepError;
                if (unfinished == 0)
                {
                    throw new InvalidOperationException(
                        $"request {sub.Id} has no more outputs: it is unknown to the engine, " +
                        "or Poll took its outputs before it was streamed");
                }
            }
        }

        private Output Take(Subscription sub)
        {
            lock (dispatchLock)
            {
                return sub.Pending.Count > 0 ? sub.Pending.Dequeue() : null;
            }
        }

        private bool HasPending(Subscription sub)
        {
            lock (dispatchLock)
            {
                return sub.Pending.Count > 0 || sub.Remaining == 0;
            }
        }

        private bool IsComplete(Subscription sub)
        {
            lock (dispatchLock)
            {
                return sub.Remaining == 0 && sub.Pending.Count == 0;
            }
        }

        // The consumer left early: drop the request's remaining outputs and
        // abort it, unless it already finished.
        private void Abandon(Subscription sub)
        {
            lock (dispatchLock)
            {
                sub.Pending.Clear();
                if (sub.Remaining == 0) return;
                sub.Abandoned = true;
            }
            if (handle.IsClosed) return;
            try
            {
                Abort(sub.Id);
            }
            catch (PvllmException e) when (e.Status == PvllmStatus.NotFound)
            {
                // It finished in the library; its last outputs are dropped on routing.
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
                if (o.IsFinished)
                {
                    reasons[i] = o.FinishReason;
                    errors[i] = o.ErrorMessage;
                }
            }
            var samples = new Sample[numSamples];
            for (int i = 0; i < numSamples; i++)
            {
                samples[i] = new Sample(i, tokens[i], texts[i].ToString(), reasons[i], logprobs[i], errors[i] ?? "");
            }
            return new Generation(requestId, samples);
        }

        // The outputs of one streamed request. Guarded by dispatchLock.
        private sealed class Subscription
        {
            public Subscription(ulong id, int numSamples)
            {
                Id = id;
                Remaining = numSamples;
            }

            public readonly ulong Id;
            public readonly Queue<Output> Pending = new Queue<Output>();
            // Samples that have not delivered their final output yet.
            public int Remaining;
            // The consumer is gone: outputs are dropped until the last one.
            public bool Abandoned;

            public void Deliver(Output output)
            {
                if (output.IsFinished) Remaining--;
                if (!Abandoned) Pending.Enqueue(output);
            }
        }
    }
}
