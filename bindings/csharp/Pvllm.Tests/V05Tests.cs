using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// What libpvllm 0.5 appends, through the binding: asynchronous streams on
    /// on_output handlers, prompt logprobs, beam search, preemption by swap,
    /// request metrics and the new statistics.
    /// </summary>
    [TestFixture]
    public class V05Tests
    {
        private static readonly int[] Prompt = { 1, 40, 41, 42, 43, 44, 45 };
        private Engine engine;

        [SetUp]
        public void CreateEngine() => engine = TinyModel.CreateEngine();

        [TearDown]
        public void DisposeEngine() => engine?.Dispose();

        private static SamplingParams Greedy(int maxTokens)
        {
            SamplingParams p = SamplingParams.Greedy(maxTokens);
            p.IgnoreEos = true;
            return p;
        }

        // Reads an AsyncOutputStream to its end as await foreach would.
        private static async Task<List<Output>> ReadAll(AsyncOutputStream stream, CancellationToken token)
        {
            var outputs = new List<Output>();
            AsyncOutputEnumerator e = stream.GetAsyncEnumerator(token);
            try
            {
                while (await e.MoveNextAsync()) outputs.Add(e.Current);
            }
            finally
            {
                await e.DisposeAsync();
            }
            return outputs;
        }

        [Test]
        public void AsyncStreamsGiveWhatGenerateGives()
        {
            Generation expected = engine.Generate(new Request(Prompt, Greedy(12)));
            // Three streams at once, awaited together: no loop of the caller's steps.
            Task<List<Output>>[] reads = Enumerable.Range(0, 3)
                .Select(_ => ReadAll(engine.StreamAsync(new Request(Prompt, Greedy(12))), CancellationToken.None))
                .ToArray();
            Assert.IsTrue(Task.WaitAll(reads, TimeSpan.FromSeconds(60)), "the streams did not end");
            foreach (Task<List<Output>> read in reads)
            {
                List<Output> outputs = read.Result;
                CollectionAssert.AreEqual(expected.Samples[0].TokenIds, outputs.SelectMany(o => o.TokenIds).ToList());
                Assert.AreEqual(expected.Text, string.Concat(outputs.Select(o => o.Text)));
                Assert.IsTrue(outputs.Last().RequestFinished);
                Assert.AreEqual(1, outputs.Count(o => o.RequestFinished));
                CollectionAssert.AreEqual(Enumerable.Range(0, outputs.Count).Select(i => (ulong)i).ToList(),
                                          outputs.Select(o => o.Sequence).ToList(), "in order");
                Assert.IsNotNull(outputs.Last().Metrics);
                Assert.AreEqual(12, outputs.Last().Metrics.NumGeneratedTokens);
            }
        }

        [Test]
        public void CancellingAnAsyncStreamAbortsItsRequest()
        {
            var source = new CancellationTokenSource();
            AsyncOutputEnumerator e = engine.StreamAsync(new Request(Prompt, Greedy(400))).GetAsyncEnumerator(source.Token);
            Assert.IsTrue(e.MoveNextAsync().Result);
            source.Cancel();
            Assert.Throws<OperationCanceledException>(() =>
            {
                try { e.MoveNextAsync().GetAwaiter().GetResult(); }
                catch (AggregateException a) { throw a.InnerException; }
            });
            e.Dispose();
            // The engine drains the aborted request and stays usable.
            for (int i = 0; i < 1000 && engine.GetStats().NumRunning + engine.GetStats().NumWaiting > 0; i++) engine.Step();
            Assert.AreEqual(0, engine.GetStats().NumRunning);
            Assert.AreEqual(3, engine.Generate(new Request(Prompt, Greedy(3))).Samples[0].TokenIds.Count);
        }

        [Test]
        public void AStreamBoundToATokenIsCancelledThroughIt()
        {
            foreach (bool viaWith in new[] { false, true })
            {
                var source = new CancellationTokenSource();
                var request = new Request(Prompt, Greedy(400));
                AsyncOutputStream stream = viaWith
                    ? engine.StreamAsync(request).WithCancellation(source.Token)
                    : engine.StreamAsync(request, source.Token);
                // What `await foreach (var o in stream)` compiles to.
                AsyncOutputEnumerator e = stream.GetAsyncEnumerator();
                int read = 0;
                Assert.Throws<OperationCanceledException>(() =>
                {
                    try
                    {
                        while (e.MoveNextAsync().GetAwaiter().GetResult())
                            if (++read == 2) source.Cancel();
                    }
                    finally
                    {
                        e.DisposeAsync().Wait();
                    }
                });
                Assert.AreEqual(2, read, viaWith ? "WithCancellation" : "StreamAsync(request, token)");
                for (int i = 0; i < 1000 && engine.GetStats().NumRunning + engine.GetStats().NumWaiting > 0; i++) engine.Step();
                Assert.AreEqual(0, engine.GetStats().NumRunning);
            }
        }

        // A stop string made of a multi-byte character and its neighbours,
        // from a generation that streams such characters: the text ends right
        // before it, and no output showed any of it first.
        [Test]
        public void MultiByteStopStringsEndTheStreamBeforeThem()
        {
            var tried = new List<string>();
            foreach (string prompt in new[] { "Once upon a time", "The café", "She said 你好", "A naïve dog", "Tom" })
            {
                string full = engine.Generate(new Request(prompt, Greedy(48))).Text;
                // A non-ASCII character in the second half (text streamed before
                // it), after an ASCII one, with the character after it.
                int pick = -1;
                for (int i = Math.Max(1, full.Length / 2); i + 1 < full.Length; i++)
                {
                    if (full[i] > 0x7F && !char.IsSurrogate(full[i]) && full[i - 1] <= 0x7F && !char.IsSurrogate(full[i + 1]))
                    {
                        pick = i;
                        break;
                    }
                }
                if (pick < 0)
                {
                    tried.Add(full);
                    continue;
                }
                string stop = full.Substring(pick - 1, 3);
                int at = full.IndexOf(stop, StringComparison.Ordinal);
                SamplingParams p = Greedy(48);
                p.Stop = new List<string> { stop };
                Sample s = engine.Generate(new Request(prompt, p)).Samples[0];
                Assert.AreEqual(FinishReason.Stop, s.FinishReason, "stop '" + stop + "'");
                Assert.AreEqual(full.Substring(0, at), s.Text, "stop '" + stop + "'");
                Assert.IsNotEmpty(s.Text);
                return;
            }
            Assert.Fail("no greedy text held a non-ASCII character: " + string.Join(" | ", tried));
        }

        [Test]
        public void PromptLogprobsAndMetricsComeWithTheGeneration()
        {
            SamplingParams p = Greedy(5);
            p.PromptLogprobs = 2;
            Generation g = engine.Generate(new Request(Prompt, p));
            Assert.AreEqual(Prompt.Length - 1, g.PromptLogprobs.Count);
            for (int i = 0; i < g.PromptLogprobs.Count; i++)
            {
                Assert.AreEqual(Prompt[i + 1], g.PromptLogprobs[i].TokenId);
                Assert.LessOrEqual(g.PromptLogprobs[i].Logprob, 0f);
                Assert.AreEqual(2, g.PromptLogprobs[i].Top.Count);
            }
            Assert.AreEqual(Prompt.Length, g.Metrics.NumPromptTokens);
            Assert.Greater(g.Metrics.TimeToFirstToken, 0.0);
            Assert.GreaterOrEqual(g.Metrics.E2eLatency, g.Metrics.TimeToFirstToken);
            p.PromptLogprobs = 21;
            var e = Assert.Throws<PvllmException>(() => engine.Submit(new Request(Prompt, p)));
            Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status);
        }

        [Test]
        public void BeamSearchReturnsScoredHypothesesBestFirst()
        {
            var p = new SamplingParams
            {
                Temperature = 0f, MaxTokens = 8, BeamWidth = 3, N = 2, EarlyStopping = EarlyStopping.Never,
            };
            Generation g = engine.Generate(new Request(Prompt, p));
            Assert.AreEqual(2, g.Samples.Count);
            Assert.Less(g.Samples[0].Score, 0.0);
            Assert.GreaterOrEqual(g.Samples[0].Score, g.Samples[1].Score);
            Assert.Greater(g.Samples[0].TokenIds.Count, 0);
            p.Temperature = 0.8f;
            Assert.Throws<PvllmException>(() => engine.Submit(new Request(Prompt, p)));
        }

        [Test]
        public void PreemptionBySwapIsCounted()
        {
            EngineOptions options = TinyModel.Options();
            options.BlockSize = 8;
            options.NumKvBlocks = 14;
            options.MaxModelLen = 96;
            options.PreemptionMode = PreemptionMode.Swap;
            MemoryEstimate estimate = Engine.EstimateMemory(options);
            Assert.AreEqual(14 * estimate.KvBytesPerBlock, estimate.SwapBytes);
            using (Engine swapping = Engine.Create(options))
            {
                var requests = Enumerable.Range(0, 5)
                    .Select(r => new Request(Enumerable.Range(0, 10 + 3 * r).Select(i => i == 0 ? 1 : 3 + (i * 7) % 200).ToArray(),
                                             Greedy(40)))
                    .ToList();
                // All five are queued before the first step, so they compete for
                // the pool whatever the timing of the threads that read them
                // (GenerateAsync each would submit as its task starts, and on a
                // busy machine one could finish before the next arrives).
                ulong[] ids = requests.Select(r => swapping.Submit(r, Delivery.PerRequest)).ToArray();
                Task<int>[] runs = ids.Select(id => Task.Run(() => swapping.Stream(id).Sum(o => o.TokenIds.Count))).ToArray();
                Assert.IsTrue(Task.WaitAll(runs, TimeSpan.FromSeconds(60)));
                foreach (Task<int> run in runs) Assert.AreEqual(40, run.Result);
                EngineStats s = swapping.GetStats();
                Assert.Greater(s.NumPreemptionsBySwap, 0);
                Assert.AreEqual(s.NumBlocksSwappedOut, s.NumBlocksSwappedIn);
                Assert.AreEqual((s.NumBlocksSwappedOut + s.NumBlocksSwappedIn) * (long)estimate.KvBytesPerBlock,
                                s.NumSwapBytes);
                Assert.Greater(s.StepTimeP50Ms, 0f);
            }
        }
    }
}
