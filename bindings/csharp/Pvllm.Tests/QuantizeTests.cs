using System.IO;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// EngineOptions.Quantize (libpvllm 0.10) on the stories260K checkpoint this
    /// repository carries: q8_0 generates greedily, the estimate counts fewer
    /// weight bytes, and an unknown scheme is InvalidArgument naming the schemes.
    /// </summary>
    [TestFixture]
    public class QuantizeTests
    {
        /// <summary>models/stories260K/stories260K.bin above the test assembly.</summary>
        private static string Stories260K()
        {
            const string relative = "models/stories260K/stories260K.bin";
            string dir = Path.GetDirectoryName(typeof(QuantizeTests).Assembly.Location);
            for (; dir != null; dir = Path.GetDirectoryName(dir))
            {
                string candidate = Path.Combine(dir, relative);
                if (File.Exists(candidate)) return candidate;
            }
            Assert.Fail(relative + " is not above the test assembly");
            return null;
        }

        private static EngineOptions Options(string quantize)
            => new EngineOptions(Stories260K())
            {
                Device = "cpu",
                KvCacheBytes = 8L << 20,
                NumThreads = 2,
                Quantize = quantize,
            };

        [Test]
        public void Q8_0Generates()
        {
            using (Engine engine = Engine.Create(Options("q8_0")))
            {
                SamplingParams p = SamplingParams.Greedy(8);
                p.IgnoreEos = true;
                Generation g = engine.Generate(new Request("Once upon a time", p));
                Assert.AreEqual(8, g.Samples[0].TokenIds.Count);
                Assert.IsNotEmpty(g.Text);
            }
        }

        [Test]
        public void TheEstimateCountsQuantizedWeights()
        {
            MemoryEstimate plain = Engine.EstimateMemory(Options(null));
            MemoryEstimate q8 = Engine.EstimateMemory(Options("q8_0"));
            MemoryEstimate q4 = Engine.EstimateMemory(Options("q4_k_m"));
            Assert.Less(q8.WeightBytes, plain.WeightBytes);
            Assert.Less(q4.WeightBytes, q8.WeightBytes);
            Assert.AreEqual(plain.WeightBytes, Engine.EstimateMemory(Options("")).WeightBytes);
        }

        [Test]
        public void AnUnknownSchemeIsInvalidArgumentNamingTheSchemes()
        {
            var e = Assert.Throws<PvllmException>(() => Engine.Create(Options("q9_9")));
            Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
            StringAssert.Contains("\"q9_9\"", e.Message);
            StringAssert.Contains("q4_k_m", e.Message);
            e = Assert.Throws<PvllmException>(() => Engine.EstimateMemory(Options("q9_9")));
            Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
            e = Assert.Throws<PvllmException>(() => Engine.Create(Options("q8\0_0")));
            Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
        }
    }
}
