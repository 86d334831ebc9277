using System;
using System.Collections.Concurrent;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;

namespace Pvllm
{
    /// <summary>
    /// One request's outputs as an asynchronous stream, fed by the library's
    /// on_output handler (pvllm_output_callback, since 0.5). On C# 8 and later:
    /// <c>await foreach (Output o in engine.StreamAsync(request, token))</c>
    /// (the pattern: GetAsyncEnumerator, MoveNextAsync, Current); earlier, call
    /// MoveNextAsync and read Current by hand. Awaiting steps the engine on a
    /// thread-pool thread when no output is waiting (or waits for the thread
    /// that is stepping), so no loop of the caller's is needed; the stream ends
    /// after the request's last output. Cancelling the token aborts the
    /// request; so does disposing the enumerator before the end.
    /// </summary>
    public sealed class AsyncOutputStream
    {
        private readonly Engine engine;
        private readonly HandlerState state;
        private readonly CancellationToken boundToken;

        internal AsyncOutputStream(Engine engine, HandlerState state, CancellationToken boundToken)
        {
            this.engine = engine;
            this.state = state;
            this.boundToken = boundToken;
        }

        /// <summary>The library's request id.</summary>
        public ulong RequestId => state.RequestId;

        /// <summary>
        /// The same stream bound to `cancellationToken` (as
        /// IAsyncEnumerable's WithCancellation): <c>await foreach</c> over it
        /// aborts the request when the token is cancelled.
        /// </summary>
        public AsyncOutputStream WithCancellation(CancellationToken cancellationToken)
            => new AsyncOutputStream(engine, state, cancellationToken);

        /// <summary>
        /// The enumerator; `cancellationToken` (or, when it cannot be
        /// cancelled, the token the stream is bound to) aborts the request.
        /// Read the stream once: its outputs go to one enumerator.
        /// </summary>
        public AsyncOutputEnumerator GetAsyncEnumerator(CancellationToken cancellationToken = default(CancellationToken))
            => new AsyncOutputEnumerator(engine, state,
                                         cancellationToken.CanBeCanceled ? cancellationToken : boundToken);
    }

    /// <summary>The enumerator of an AsyncOutputStream.</summary>
    public sealed class AsyncOutputEnumerator : IDisposable
    {
        private readonly Engine engine;
        private readonly HandlerState state;
        private readonly CancellationToken cancellationToken;
        private readonly CancellationTokenRegistration registration;
        private bool ended;

        internal AsyncOutputEnumerator(Engine engine, HandlerState state, CancellationToken cancellationToken)
        {
            this.engine = engine;
            this.state = state;
            this.cancellationToken = cancellationToken;
            registration = cancellationToken.Register(() => engine.AbortQuietly(state.RequestId));
        }

        /// <summary>The output MoveNextAsync moved to.</summary>
        public Output Current { get; private set; }

        /// <summary>
        /// Moves to the request's next output: true with it in Current, false
        /// after the last. Throws OperationCanceledException once the token is
        /// cancelled (the request is aborted).
        /// </summary>
        public async Task<bool> MoveNextAsync()
        {
            while (true)
            {
                cancellationToken.ThrowIfCancellationRequested();
                Output output;
                if (state.Outputs.TryDequeue(out output))
                {
                    Current = output;
                    ended = ended || output.RequestFinished;
                    return true;
                }
                if (ended) return false;
                await Task.Run(() => engine.StepForHandler(state)).ConfigureAwait(false);
            }
        }

        /// <summary>Dispose, as await foreach calls it.</summary>
        public Task DisposeAsync()
        {
            Dispose();
            return Task.FromResult(0);
        }

        /// <summary>Aborts the request unless its last output was read.</summary>
        public void Dispose()
        {
            registration.Dispose();
            if (!ended) engine.AbortQuietly(state.RequestId);
        }
    }

    /// <summary>
    /// What the on_output handler of one request feeds: its outputs, and a
    /// signal for the thread waiting on them. A GCHandle to it is the
    /// handler's user_data, freed with the request's last output.
    /// </summary>
    internal sealed class HandlerState
    {
        internal ulong RequestId;
        internal Engine Owner;
        internal readonly ConcurrentQueue<Output> Outputs = new ConcurrentQueue<Output>();
        internal readonly SemaphoreSlim Arrived = new SemaphoreSlim(0);
        internal GCHandle Handle;

        // The one native handler of every stream: a static delegate, so the
        // function pointer the library holds stays valid.
        internal static readonly NativeMethods.pvllm_output_callback Callback = OnOutput;
        internal static readonly IntPtr CallbackPointer = Marshal.GetFunctionPointerForDelegate(Callback);

        // Runs on the thread inside pvllm_step (or pvllm_submit); nothing may
        // throw back into the library.
        private static void OnOutput(IntPtr output, IntPtr userData)
        {
            try
            {
                var state = (HandlerState)GCHandle.FromIntPtr(userData).Target;
                Output o = Output.FromNative(output);
                state.Outputs.Enqueue(o);
                state.Arrived.Release();
                // Nothing more comes for it; whoever takes it off the live list
                // (this, or Engine.Dispose) frees the handle.
                if (o.RequestFinished && state.Owner.HandlerDone(state)) state.Handle.Free();
            }
            catch (Exception e)
            {
                Console.Error.WriteLine("pvllm: an on_output handler failed: " + e);
            }
        }
    }
}
