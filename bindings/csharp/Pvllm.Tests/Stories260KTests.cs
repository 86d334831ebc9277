using System;
using System.IO;
using System.Linq;
using System.Text.RegularExpressions;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// The real stories260K checkpoint from $PVLLM_SHARED_DIR against the
    /// golden greedy output of llama2.c's run.c; skipped without it.
    /// </summary>
    [TestFixture]
    public class Stories260KTests
    {
        private static string SharedPath(string relative)
        {
            string shared = Environment.GetEnvironmentVariable("PVLLM_SHARED_DIR");
            if (string.IsNullOrEmpty(shared))
            {
                Assert.Ignore("PVLLM_SHARED_DIR is not set: the stories260K checkpoint is not available");
            }
            string path = Path.Combine(shared, relative);
            if (!File.Exists(path) && !Directory.Exists(path))
            {
                Assert.Ignore(relative + " is not under PVLLM_SHARED_DIR (" + shared + ")");
            }
            return path;
        }

        private static Engine Create(string model)
            => Engine.Create(new EngineOptions(SharedPath(model)) { KvCacheBytes = 16L << 20, NumThreads = 2 });

        [TestCase("models/stories260K/stories260K.bin")]
        [TestCase("models/stories260K-hf")]
        public void GreedyContinuationOfOnceUponATime(string model)
        {
            using (Engine engine = Create(model))
            {
                var sampling = SamplingParams.Greedy(60);
                Generation g = engine.Generate(new Request("Once upon a time", sampling));
                StringAssert.StartsWith(", there was a little girl named Lily", g.Text);
            }
        }

        [Test]
        public void MatchesTheGoldenTokensOfRunC()
        {
            string golden = File.ReadAllText(SharedPath("golden/stories260K-greedy.json"));
            // The first case: {"prompt": ..., "steps": N, "prompt_ids": [...], ..., "generated_ids": [...]}
            int steps = int.Parse(Regex.Match(golden, "\"steps\"\\s*:\\s*(\\d+)").Groups[1].Value);
            string prompt = Regex.Match(golden, "\"prompt\"\\s*:\\s*\"([^\"]*)\"").Groups[1].Value;
            int[] promptIds = Ids(golden, "prompt_ids");
            int[] generated = Ids(golden, "generated_ids");
            Assert.IsNotEmpty(generated);
            using (Engine engine = Create("models/stories260K/stories260K.bin"))
            {
                // run.c: at most steps - len(prompt) + 1 tokens; BOS (1) ends a story.
                SamplingParams sampling = SamplingParams.Greedy(steps - promptIds.Length + 1);
                sampling.StopTokenIds.Add(1);
                Generation g = engine.Generate(new Request(promptIds, sampling));
                CollectionAssert.AreEqual(generated, g.Samples[0].TokenIds);
                Assert.AreEqual(engine.Tokenize(prompt, addBos: true), promptIds,
                                "sentencepiece encoding of \"" + prompt + "\"");
            }
        }

        private static int[] Ids(string json, string key)
        {
            Match m = Regex.Match(json, "\"" + key + "\"\\s*:\\s*\\[([^\\]]*)\\]");
            Assert.IsTrue(m.Success, key + " in the golden file");
            return m.Groups[1].Value.Split(new[] { ',' }, StringSplitOptions.RemoveEmptyEntries)
                    .Select(s => int.Parse(s.Trim())).ToArray();
        }
    }
}
