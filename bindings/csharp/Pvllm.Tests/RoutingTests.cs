using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// Each Stream reads its own request's outputs from the library
    /// (Delivery.PerRequest, PollRequest, Wait) and ends on the library's
    /// RequestFinished flag: several streams on several threads, a stream
    /// nobody reads, Poll beside a stream, aborts from elsewhere, and one
    /// thread per request blocked in Wait while another steps.
    /// </summary>
    [TestFixture]
    public class RoutingTests
    {
        private static readonly TimeSpan Timeout = TimeSpan.FromSeconds(60);

        private Engine engine;

        [SetUp]
        public void CreateEngine() => engine = TinyModel.CreateEngine();

        [TearDown]
        public void DisposeEngine() => engine?.Dispose();

        private static SamplingParams Greedy(int maxTokens, int n = 1)
        {
            SamplingParams p = SamplingParams.Greedy(maxTokens);
            p.IgnoreEos = true;
            p.N = n;
            if (n > 1)
            {
                p.Temperature = 0.8f;
                p.Seed = 11;
            }
            return p;
        }

        // One request's outputs: all its own, `tokens` in total, each sample
        // finished once, the request finished once and last.
        private static void AssertComplete(ulong id, IList<Output> outputs, int samples, int tokens)
        {
            Assert.IsTrue(outputs.All(o => o.RequestId == id), "outputs of request " + id + " only");
            if (tokens >= 0) Assert.AreEqual(tokens, outputs.Sum(o => o.TokenIds.Count), "tokens of request " + id);
            for (int k = 0; k < samples; k++)
            {
                Assert.AreEqual(1, outputs.Count(o => o.SampleIndex == k && o.IsFinished), "sample " + k + " of " + id);
            }
            Assert.AreEqual(1, outputs.Count(o => o.RequestFinished), "request " + id + " finishes once");
            Assert.IsTrue(outputs.Last().RequestFinished, "its last output says so");
        }

        [Test]
        public void StreamsOnSeveralThreadsEachReadTheirOwnRequest()
        {
            var results = new ConcurrentDictionary<int, List<Output>>();
            var failures = new ConcurrentQueue<Exception>();
            Thread[] threads = Enumerable.Range(0, 4).Select(t => new Thread(() =>
            {
                try
                {
                    results[t] = engine.Stream(new Request("reader " + t, Greedy(8 + t, 1 + t % 3))).ToList();
                }
                catch (Exception e)
                {
                    failures.Enqueue(e);
                }
            })).ToArray();
            foreach (Thread t in threads) t.Start();
            foreach (Thread t in threads) Assert.IsTrue(t.Join(Timeout));
            Assert.IsEmpty(failures, string.Join("\n", failures));
            for (int t = 0; t < 4; t++)
            {
                int n = 1 + t % 3;
                AssertComplete(results[t][0].RequestId, results[t], n, n * (8 + t));
            }
        }

        [Test]
        public void AStreamNobodyReadsHoldsBackOnlyItself()
        {
            IEnumerator<Output> idle = engine.Stream(new Request("idle", Greedy(20, 2))).GetEnumerator();
            Assert.IsTrue(idle.MoveNext());
            var outputs = new List<Output> { idle.Current };
            Generation[] others = Enumerable.Range(0, 3)
                .Select(i => engine.GenerateAsync(new Request("busy " + i, Greedy(15))))
                .Select(task => { Assert.IsTrue(task.Wait(Timeout)); return task.Result; }).ToArray();
            Assert.IsTrue(others.All(g => g.Samples[0].TokenIds.Count == 15));
            while (idle.MoveNext()) outputs.Add(idle.Current);
            idle.Dispose();
            AssertComplete(outputs[0].RequestId, outputs, 2, 40);
        }

        [Test]
        public void PollBesideAStreamTakesOnlySharedRequests()
        {
            ulong shared = engine.Submit(new Request("shared", Greedy(6)));
            IEnumerator<Output> stream = engine.Stream(new Request("streamed", Greedy(12))).GetEnumerator();
            Assert.IsTrue(stream.MoveNext());
            var outputs = new List<Output> { stream.Current };
            var polled = new List<Output>();
            for (int i = 0; i < 8; i++)
            {
                engine.Step();
                polled.AddRange(engine.Poll());
            }
            while (stream.MoveNext()) outputs.Add(stream.Current);
            AssertComplete(outputs[0].RequestId, outputs, 1, 12);
            AssertComplete(shared, polled, 1, 6);
        }

        [Test]
        public void AbortFromAnotherThreadEndsTheStreamOnce()
        {
            var outputs = new List<Output>();
            ulong id = 0;
            var first = new ManualResetEventSlim();
            var reader = new Thread(() =>
            {
                foreach (Output o in engine.Stream(new Request("long", Greedy(400, 2))))
                {
                    outputs.Add(o);
                    id = o.RequestId;
                    first.Set();
                }
            });
            reader.Start();
            Assert.IsTrue(first.Wait(Timeout));
            engine.Abort(Volatile.Read(ref id));
            Assert.IsTrue(reader.Join(Timeout));
            AssertComplete(id, outputs, 2, -1);
            Assert.AreEqual(FinishReason.Abort, outputs.Last().FinishReason);
            Assert.Less(outputs.Sum(o => o.TokenIds.Count), 800);
        }

        [Test]
        public void OneThreadPerRequestWaitsWhileAnotherSteps()
        {
            var stop = new ManualResetEventSlim();
            var failures = new ConcurrentQueue<Exception>();
            var stepper = new Thread(() =>
            {
                try
                {
                    while (true)
                    {
                        bool stopping = stop.IsSet;
                        int unfinished = engine.Step();
                        if (stopping && unfinished == 0) break;
                        if (unfinished == 0) Thread.Sleep(1);
                    }
                }
                catch (Exception e)
                {
                    failures.Enqueue(e);
                }
            });
            stepper.Start();
            var results = new ConcurrentDictionary<int, KeyValuePair<ulong, List<Output>>>();
            Thread[] workers = Enumerable.Range(0, 4).Select(w => new Thread(() =>
            {
                try
                {
                    ulong id = engine.Submit(new Request("worker " + w, Greedy(10 + w)), Delivery.PerRequest);
                    var mine = new List<Output>();
                    while (mine.Count == 0 || !mine.Last().RequestFinished)
                    {
                        if (engine.Wait(id, 1000)) mine.AddRange(engine.PollRequest(id));
                    }
                    var gone = Assert.Throws<PvllmException>(() => engine.Wait(id, 0));
                    Assert.AreEqual(PvllmStatus.NotFound, gone.Status);
                    results[w] = new KeyValuePair<ulong, List<Output>>(id, mine);
                }
                catch (Exception e)
                {
                    failures.Enqueue(e);
                }
            })).ToArray();
            foreach (Thread t in workers) t.Start();
            foreach (Thread t in workers) Assert.IsTrue(t.Join(Timeout));
            stop.Set();
            Assert.IsTrue(stepper.Join(Timeout));
            Assert.IsEmpty(failures, string.Join("\n", failures));
            Assert.AreEqual(4, results.Count);
            for (int w = 0; w < 4; w++)
            {
                AssertComplete(results[w].Key, results[w].Value, 1, 10 + w);
            }
        }

        [Test]
        public void WaitTimesOutWithoutAStepAndDetachDropsOutputs()
        {
            ulong id = engine.Submit(new Request("x", Greedy(50)), Delivery.PerRequest);
            Assert.IsFalse(engine.Wait(id, 20));
            engine.Step();
            Assert.IsTrue(engine.Wait(id, 0));
            Assert.IsEmpty(engine.Poll(), "PerRequest outputs skip Poll");
            engine.Detach(id);
            Assert.AreEqual(PvllmStatus.NotFound, Assert.Throws<PvllmException>(() => engine.PollRequest(id)).Status);
            engine.Abort(id);
            while (engine.Step() > 0) { }
            Assert.IsEmpty(engine.Poll());
        }

        [Test]
        public void FinishReasonsHaveTheLibrarysNames()
        {
            Assert.AreEqual("PVLLM_FINISH_STOP", Output.FinishReasonName(FinishReason.Stop));
            Assert.AreEqual("PVLLM_FINISH_ABORT", Output.FinishReasonName(FinishReason.Abort));
            Assert.AreEqual("PVLLM_FINISH_UNKNOWN", Output.FinishReasonName((FinishReason)42));
            Assert.AreEqual("PVLLM_STATUS_TIMEOUT", new PvllmException(PvllmStatus.Timeout, "").StatusText);
        }
    }
}
