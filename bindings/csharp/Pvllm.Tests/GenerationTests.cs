using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>Real generation on the tiny random model through the library.</summary>
    [TestFixture]
    public class GenerationTests
    {
        private const string Prompt = "Hello world";
        private static readonly TimeSpan Timeout = TimeSpan.FromSeconds(60);

        private Engine engine;

        [SetUp]
        public void CreateEngine() => engine = TinyModel.CreateEngine();

        [TearDown]
        public void DisposeEngine() => engine?.Dispose();

        // Greedy, ignoring EOS so the random model always runs to max_tokens.
        private static SamplingParams Greedy(int maxTokens)
        {
            SamplingParams p = SamplingParams.Greedy(maxTokens);
            p.IgnoreEos = true;
            return p;
        }

        // Steps and polls until `count` samples have finished; the outputs in order.
        private static List<Output> RunUntilFinished(Engine e, int count)
        {
            var outputs = new List<Output>();
            int finished = 0;
            for (int step = 0; finished < count; step++)
            {
                Assert.Less(step, 10000, "the engine never finished");
                e.Step();
                foreach (Output o in e.Poll())
                {
                    outputs.Add(o);
                    if (o.IsFinished) finished++;
                }
            }
            return outputs;
        }

        [Test]
        public void GreedyGenerationIsDeterministic()
        {
            Generation first = engine.Generate(new Request(Prompt, Greedy(24)));
            Generation second = engine.Generate(new Request(Prompt, Greedy(24)));
            using (Engine other = TinyModel.CreateEngine())
            {
                Generation third = other.Generate(new Request(Prompt, Greedy(24)));
                CollectionAssert.AreEqual(first.Samples[0].TokenIds, third.Samples[0].TokenIds);
            }
            Assert.AreEqual(1, first.Samples.Count);
            Assert.AreEqual(24, first.Samples[0].TokenIds.Count);
            Assert.AreEqual(FinishReason.Length, first.Samples[0].FinishReason);
            CollectionAssert.AreEqual(first.Samples[0].TokenIds, second.Samples[0].TokenIds);
            Assert.AreEqual(first.Text, second.Text);
            Assert.AreNotEqual(first.RequestId, second.RequestId);
        }

        [Test]
        public void PromptAsTokenIdsMatchesPromptAsText()
        {
            int[] ids = engine.Tokenize(Prompt, addBos: true);
            Generation fromText = engine.Generate(new Request(Prompt, Greedy(12)));
            Generation fromIds = engine.Generate(new Request(ids, Greedy(12)));
            CollectionAssert.AreEqual(fromText.Samples[0].TokenIds, fromIds.Samples[0].TokenIds);
        }

        [Test]
        public void StreamedTextIsTheConcatenationOfOutputs()
        {
            Generation whole = engine.Generate(new Request(Prompt, Greedy(32)));
            var text = new StringBuilder();
            var tokens = new List<int>();
            var outputs = engine.Stream(new Request(Prompt, Greedy(32))).ToList();
            Assert.Greater(outputs.Count, 1, "a 32-token generation streams in several outputs");
            foreach (Output o in outputs)
            {
                text.Append(o.Text);
                tokens.AddRange(o.TokenIds);
                Assert.AreEqual(0, o.SampleIndex);
            }
            Assert.AreEqual(1, outputs.Count(o => o.IsFinished), "exactly one final output");
            Assert.IsTrue(outputs.Last().IsFinished, "the final output comes last");
            Assert.AreEqual(FinishReason.Length, outputs.Last().FinishReason);
            CollectionAssert.AreEqual(whole.Samples[0].TokenIds, tokens);
            Assert.AreEqual(whole.Text, text.ToString());
            Assert.IsNotEmpty(text.ToString());
            // The streamed text is the detokenized tokens (up to the leading
            // space a continuation keeps after its prompt).
            Assert.AreEqual(engine.Detokenize(tokens).TrimStart(' '), text.ToString().TrimStart(' '));
        }

        [Test]
        public void ParallelSamplesEachFinishOnce()
        {
            var sampling = new SamplingParams { N = 3, MaxTokens = 10, IgnoreEos = true, Seed = 1234, Temperature = 1.0f };
            List<Output> outputs = engine.Stream(new Request(Prompt, sampling)).ToList();
            for (int i = 0; i < 3; i++)
            {
                List<Output> mine = outputs.Where(o => o.SampleIndex == i).ToList();
                Assert.AreEqual(1, mine.Count(o => o.IsFinished), "sample " + i + " finishes exactly once");
                Assert.AreEqual(10, mine.Sum(o => o.TokenIds.Count), "sample " + i);
                Assert.IsTrue(mine.Last().IsFinished);
                Assert.AreEqual(FinishReason.Length, mine.Last().FinishReason);
            }
            Assert.IsTrue(outputs.All(o => o.SampleIndex >= 0 && o.SampleIndex < 3));

            Generation seeded1 = engine.Generate(new Request(Prompt, sampling));
            Generation seeded2 = engine.Generate(new Request(Prompt, sampling));
            Assert.AreEqual(3, seeded1.Samples.Count);
            for (int i = 0; i < 3; i++)
            {
                CollectionAssert.AreEqual(seeded1.Samples[i].TokenIds, seeded2.Samples[i].TokenIds,
                                          "a fixed seed repeats sample " + i);
            }
        }

        [Test]
        public void MaxTokensEndsWithLength()
        {
            Generation g = engine.Generate(new Request(Prompt, Greedy(5)));
            Assert.AreEqual(FinishReason.Length, g.Samples[0].FinishReason);
            Assert.AreEqual(5, g.Samples[0].TokenIds.Count);
            Assert.AreEqual("", g.Samples[0].ErrorMessage);
        }

        [Test]
        public void StopTokenEndsWithStopAndIsNotReported()
        {
            List<int> reference = engine.Generate(new Request(Prompt, Greedy(16))).Samples[0].TokenIds.ToList();
            int stopAt = Enumerable.Range(0, reference.Count).First(i => reference.IndexOf(reference[i]) == i && i >= 3);
            SamplingParams p = Greedy(16);
            p.StopTokenIds = new List<int> { reference[stopAt] };
            Sample s = engine.Generate(new Request(Prompt, p)).Samples[0];
            Assert.AreEqual(FinishReason.Stop, s.FinishReason);
            CollectionAssert.AreEqual(reference.Take(stopAt).ToList(), s.TokenIds);
        }

        [Test]
        public void StopStringEndsWithStopAndIsCutFromText()
        {
            string reference = engine.Generate(new Request(Prompt, Greedy(24))).Text;
            Assert.GreaterOrEqual(reference.Length, 8, "reference text: '" + reference + "'");
            string stop = reference.Substring(reference.Length / 2, 2);
            int at = reference.IndexOf(stop, StringComparison.Ordinal);
            SamplingParams p = Greedy(24);
            p.Stop = new List<string> { stop };
            Sample s = engine.Generate(new Request(Prompt, p)).Samples[0];
            Assert.AreEqual(FinishReason.Stop, s.FinishReason);
            Assert.AreEqual(reference.Substring(0, at), s.Text);
        }

        [Test]
        public void LogprobsComeWithEveryToken()
        {
            SamplingParams p = Greedy(6);
            p.Logprobs = 3;
            Sample s = engine.Generate(new Request(Prompt, p)).Samples[0];
            Assert.IsNotNull(s.Logprobs);
            Assert.AreEqual(s.TokenIds.Count, s.Logprobs.Count);
            for (int i = 0; i < s.TokenIds.Count; i++)
            {
                TokenLogprobs lp = s.Logprobs[i];
                Assert.AreEqual(s.TokenIds[i], lp.TokenId);
                Assert.LessOrEqual(lp.Logprob, 0f);
                Assert.AreEqual(3, lp.Top.Count);
                Assert.AreEqual(lp.TokenId, lp.Top[0].TokenId, "greedy picks the most likely token");
                Assert.GreaterOrEqual(lp.Top[0].Logprob, lp.Top[1].Logprob);
            }
            Assert.IsNull(engine.Generate(new Request(Prompt, Greedy(2))).Samples[0].Logprobs);
        }

        [Test]
        public void AbortEndsRequestWithAbort()
        {
            ulong id = engine.Submit(new Request(Prompt, Greedy(200)));
            ulong other = engine.Submit(new Request(Prompt, Greedy(4)));
            var outputs = new List<Output>();
            for (int i = 0; i < 3; i++)
            {
                engine.Step();
                outputs.AddRange(engine.Poll());
            }
            engine.Abort(id);
            outputs.AddRange(RunUntilFinished(engine, 2 - outputs.Count(o => o.IsFinished)));
            List<Output> finals = outputs.Where(o => o.IsFinished).ToList();
            Assert.AreEqual(1, finals.Count(o => o.RequestId == id));
            Assert.AreEqual(FinishReason.Abort, finals.Single(o => o.RequestId == id).FinishReason);
            Assert.AreEqual(FinishReason.Length, finals.Single(o => o.RequestId == other).FinishReason);
            Assert.Less(outputs.Where(o => o.RequestId == id).Sum(o => o.TokenIds.Count), 200);
            var again = Assert.Throws<PvllmException>(() => engine.Abort(id));
            Assert.AreEqual(PvllmStatus.NotFound, again.Status);
        }

        [Test]
        public void LeavingAStreamEarlyAbortsItsRequest()
        {
            ulong id = 0;
            foreach (Output o in engine.Stream(new Request(Prompt, Greedy(200))))
            {
                id = o.RequestId;
                break;
            }
            Assert.AreNotEqual(0UL, id);
            Assert.AreEqual(0, engine.Step(), "the abandoned request was aborted");
            Assert.IsEmpty(engine.Poll(), "its remaining outputs are dropped");
            Assert.Throws<PvllmException>(() => engine.Abort(id));
        }

        [Test]
        public void StreamOfASubmittedRequest()
        {
            ulong id = engine.Submit(new Request(Prompt, Greedy(8)));
            engine.Step(); // its first outputs are polled by the stream, not lost
            List<Output> outputs = engine.Stream(id).ToList();
            Assert.AreEqual(8, outputs.Sum(o => o.TokenIds.Count));
            Assert.IsTrue(outputs.All(o => o.RequestId == id));
            Assert.AreEqual(FinishReason.Length, outputs.Last().FinishReason);
        }

        [Test]
        public void GenerateAsyncRunsRequestsConcurrently()
        {
            string[] prompts = { "Hello world", "Once upon a time", "café 你好", "a b c d" };
            Dictionary<string, Generation> expected = prompts.ToDictionary(
                p => p, p => engine.Generate(new Request(p, Greedy(12))));
            Task<Generation>[] tasks = prompts.Select(p => engine.GenerateAsync(new Request(p, Greedy(12)))).ToArray();
            Assert.IsTrue(Task.WaitAll(tasks, Timeout), "GenerateAsync did not finish");
            for (int i = 0; i < prompts.Length; i++)
            {
                Generation g = tasks[i].Result;
                Assert.AreEqual(FinishReason.Length, g.Samples[0].FinishReason);
                CollectionAssert.AreEqual(expected[prompts[i]].Samples[0].TokenIds, g.Samples[0].TokenIds,
                                          "batched greedy equals greedy alone for '" + prompts[i] + "'");
                Assert.AreEqual(expected[prompts[i]].Text, g.Text);
            }
            Assert.AreEqual(prompts.Length, tasks.Select(t => t.Result.RequestId).Distinct().Count());
        }

        [Test]
        public void CancellingGenerateAsyncAbortsTheRequest()
        {
            using (var cts = new CancellationTokenSource())
            {
                cts.Cancel();
                Task<Generation> task = engine.GenerateAsync(new Request(Prompt, Greedy(200)), cts.Token);
                var e = Assert.Throws<AggregateException>(() => task.Wait(Timeout));
                Assert.IsInstanceOf<OperationCanceledException>(e.InnerException);
            }
            Assert.AreEqual(0, engine.Step(), "the cancelled request was aborted");
            Assert.IsEmpty(engine.Poll());
        }

        [Test]
        public void GenerateAsyncWithBadParametersFaults()
        {
            var p = new SamplingParams { TopP = 0f };
            Task<Generation> task = engine.GenerateAsync(new Request(Prompt, p));
            var e = Assert.Throws<AggregateException>(() => task.Wait(Timeout));
            Assert.IsInstanceOf<PvllmException>(e.InnerException);
            Assert.AreEqual(PvllmStatus.InvalidArgument, ((PvllmException)e.InnerException).Status);
        }

        [Test]
        public void ConcurrentSubmitsWhileOneThreadSteps()
        {
            const int numThreads = 4, perThread = 6;
            var submitted = new ConcurrentBag<ulong>();
            var outputs = new ConcurrentQueue<Output>();
            var failures = new ConcurrentQueue<Exception>();
            int submittersDone = 0;
            var loop = new Thread(() =>
            {
                try
                {
                    while (true)
                    {
                        bool allSubmitted = Volatile.Read(ref submittersDone) == numThreads;
                        int unfinished = engine.Step();
                        foreach (Output o in engine.Poll()) outputs.Enqueue(o);
                        if (allSubmitted && unfinished == 0) break;
                        if (unfinished == 0) Thread.Sleep(1);
                    }
                }
                catch (Exception e)
                {
                    failures.Enqueue(e);
                }
            });
            loop.Start();
            Thread[] submitters = Enumerable.Range(0, numThreads).Select(t => new Thread(() =>
            {
                try
                {
                    for (int i = 0; i < perThread; i++)
                    {
                        submitted.Add(engine.Submit(new Request("thread " + t + " request " + i, Greedy(3 + i))));
                        Thread.Sleep(2);
                    }
                }
                catch (Exception e)
                {
                    failures.Enqueue(e);
                }
                finally
                {
                    Interlocked.Increment(ref submittersDone);
                }
            })).ToArray();
            foreach (Thread t in submitters) t.Start();
            foreach (Thread t in submitters) Assert.IsTrue(t.Join(Timeout));
            Assert.IsTrue(loop.Join(Timeout), "the stepping loop did not finish");
            Assert.IsEmpty(failures, string.Join("\n", failures));

            Assert.AreEqual(numThreads * perThread, submitted.Count);
            Assert.AreEqual(submitted.Count, submitted.Distinct().Count(), "request ids are unique");
            var ids = new HashSet<ulong>(submitted);
            Assert.IsTrue(outputs.All(o => ids.Contains(o.RequestId)), "outputs belong to submitted requests");
            foreach (ulong id in ids)
            {
                List<Output> mine = outputs.Where(o => o.RequestId == id).ToList();
                Assert.AreEqual(1, mine.Count(o => o.IsFinished), "request " + id + " finishes exactly once");
                Assert.IsTrue(mine.Last().IsFinished);
                Assert.AreEqual(FinishReason.Length, mine.Last().FinishReason);
            }
            Assert.AreEqual(numThreads * Enumerable.Range(0, perThread).Sum(i => 3 + i),
                            outputs.Sum(o => o.TokenIds.Count));
        }

        [Test]
        public void SeveralStreamsOnSeveralThreadsShareTheEngine()
        {
            var results = new ConcurrentDictionary<int, List<Output>>();
            Thread[] threads = Enumerable.Range(0, 3).Select(t => new Thread(() =>
            {
                results[t] = engine.Stream(new Request("stream " + t, Greedy(6 + t))).ToList();
            })).ToArray();
            foreach (Thread t in threads) t.Start();
            foreach (Thread t in threads) Assert.IsTrue(t.Join(Timeout));
            for (int t = 0; t < 3; t++)
            {
                List<Output> mine = results[t];
                Assert.AreEqual(1, mine.Select(o => o.RequestId).Distinct().Count(), "a stream sees only its request");
                Assert.AreEqual(6 + t, mine.Sum(o => o.TokenIds.Count));
                Assert.AreEqual(1, mine.Count(o => o.IsFinished));
            }
        }

        [Test]
        public void ContiguousKvAllocatorGivesTheSameOutputs()
        {
            Generation paged = engine.Generate(new Request(Prompt, Greedy(12)));
            EngineOptions o = TinyModel.Options();
            o.KvAllocator = KvAllocator.Contiguous;
            o.MaxModelLen = 64;
            Engine contiguous = Engine.Create(o);
            using (contiguous)
            {
                Generation g = contiguous.Generate(new Request(Prompt, Greedy(12)));
                CollectionAssert.AreEqual(paged.Samples[0].TokenIds, g.Samples[0].TokenIds);
            }
        }

        [Test]
        public void DisposeWhileAnotherThreadStepsEndsItsLoopCleanly()
        {
            engine.Submit(new Request(Prompt, Greedy(400)));
            Exception ended = null;
            int steps = 0;
            var loop = new Thread(() =>
            {
                try
                {
                    while (true)
                    {
                        engine.Step();
                        engine.Poll();
                        Interlocked.Increment(ref steps);
                    }
                }
                catch (Exception e)
                {
                    ended = e;
                }
            });
            loop.Start();
            while (Volatile.Read(ref steps) < 3) Thread.Sleep(1);
            engine.Dispose(); // waits for the call in flight, then frees the engine
            Assert.IsTrue(loop.Join(Timeout));
            Assert.IsInstanceOf<ObjectDisposedException>(ended);
        }

        [Test]
        public void AStreamAfterDisposeThrowsObjectDisposed()
        {
            IEnumerator<Output> stream = engine.Stream(new Request(Prompt, Greedy(400))).GetEnumerator();
            Assert.IsTrue(stream.MoveNext());
            engine.Dispose();
            Assert.Throws<ObjectDisposedException>(() => stream.MoveNext());
            stream.Dispose();
        }

        [Test]
        public void StatsCountTheWorkDone()
        {
            EngineStats before = engine.GetStats();
            Assert.Greater(before.NumBlocksTotal, 0);
            Assert.AreEqual(before.NumBlocksTotal, before.NumBlocksFree + before.NumBlocksUsed);
            engine.Generate(new Request(Prompt, Greedy(7)));
            engine.Generate(new Request(Prompt, Greedy(7)));
            EngineStats after = engine.GetStats();
            Assert.AreEqual(2, after.NumRequestsFinished - before.NumRequestsFinished);
            Assert.AreEqual(14, after.NumGenerationTokens - before.NumGenerationTokens);
            Assert.Greater(after.NumSteps, before.NumSteps);
            Assert.Greater(after.NumPromptTokensProcessed, 0);
            // Each request's prefill attends to its prompt, each of its 6 decodes to one more.
            long p = engine.Tokenize(Prompt, true).Length;
            Assert.AreEqual(2 * (7 * p + 21), after.NumKvTokensAttended - before.NumKvTokensAttended);
            Assert.AreEqual(0, after.NumRunning);
            Assert.AreEqual(0, after.NumWaiting);
        }
    }
}
