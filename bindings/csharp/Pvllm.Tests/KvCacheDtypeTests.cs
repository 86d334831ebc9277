using System.IO;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// EngineOptions.KvCacheDtype (libpvllm 0.11) on the stories260K checkpoint this
    /// repository carries: Int8 generates greedily, the estimate's block bytes follow
    /// the dtype exactly, Fp8E4M3 is Unsupported on the CPU and a value outside the
    /// enum is InvalidArgument.
    /// </summary>
    [TestFixture]
    public class KvCacheDtypeTests
    {
        /// <summary>models/stories260K/stories260K.bin above the test assembly.</summary>
        private static string Stories260K()
        {
            const string relative = "models/stories260K/stories260K.bin";
            string dir = Path.GetDirectoryName(typeof(KvCacheDtypeTests).Assembly.Location);
            for (; dir != null; dir = Path.GetDirectoryName(dir))
            {
                string candidate = Path.Combine(dir, relative);
                if (File.Exists(candidate)) return candidate;
            }
            Assert.Fail(relative + " is not above the test assembly");
            return null;
        }

        private static EngineOptions Options(KvCacheDtype dtype)
            => new EngineOptions(Stories260K())
            {
                Device = "cpu",
                KvCacheBytes = 8L << 20,
                NumThreads = 2,
                KvCacheDtype = dtype,
            };

        [Test]
        public void TheDefaultIsAuto()
        {
            Assert.AreEqual(KvCacheDtype.Auto, new EngineOptions("m").KvCacheDtype);
        }

        [Test]
        public void Int8Generates()
        {
            using (Engine engine = Engine.Create(Options(KvCacheDtype.Int8)))
            {
                SamplingParams p = SamplingParams.Greedy(8);
                p.IgnoreEos = true;
                Generation g = engine.Generate(new Request("Once upon a time", p));
                Assert.AreEqual(8, g.Samples[0].TokenIds.Count);
                Assert.IsNotEmpty(g.Text);
            }
        }

        [Test]
        public void TheEstimateCountsTheDtype()
        {
            MemoryEstimate auto = Engine.EstimateMemory(Options(KvCacheDtype.Auto));
            MemoryEstimate f32 = Engine.EstimateMemory(Options(KvCacheDtype.F32));
            MemoryEstimate f16 = Engine.EstimateMemory(Options(KvCacheDtype.F16));
            MemoryEstimate bf16 = Engine.EstimateMemory(Options(KvCacheDtype.Bf16));
            MemoryEstimate int8 = Engine.EstimateMemory(Options(KvCacheDtype.Int8));
            // Auto is f32 on the CPU.
            Assert.AreEqual(f32.KvBytesPerBlock, auto.KvBytesPerBlock);
            Assert.AreEqual(f32.NumBlocks, auto.NumBlocks);
            Assert.AreEqual(f32.KvBytesPerBlock, 2 * f16.KvBytesPerBlock);
            Assert.AreEqual(f16.KvBytesPerBlock, bf16.KvBytesPerBlock);
            // stories260K's head_dim is 8: a row of K or V is 4 * 8 = 32 bytes in f32
            // and 8 codes + a 2-byte fp16 scale = 10 bytes in int8.
            Assert.AreEqual(f32.KvBytesPerBlock * 10, int8.KvBytesPerBlock * 32);
            Assert.Greater(int8.NumBlocks, f16.NumBlocks);
            Assert.Greater(f16.NumBlocks, f32.NumBlocks);
            Assert.AreEqual(f32.WeightBytes, int8.WeightBytes);
        }

        [Test]
        public void Fp8E4M3IsUnsupportedOnTheCpu()
        {
            var e = Assert.Throws<PvllmException>(() => Engine.Create(Options(KvCacheDtype.Fp8E4M3)));
            Assert.AreEqual(PvllmStatus.Unsupported, e.Status, e.Message);
            StringAssert.Contains("int8", e.Message);
            e = Assert.Throws<PvllmException>(() => Engine.EstimateMemory(Options(KvCacheDtype.Fp8E4M3)));
            Assert.AreEqual(PvllmStatus.Unsupported, e.Status, e.Message);
        }

        [Test]
        public void AValueOutsideTheEnumIsInvalidArgument()
        {
            foreach (KvCacheDtype d in new[] { (KvCacheDtype)6, (KvCacheDtype)(-1) })
            {
                var e = Assert.Throws<PvllmException>(() => Engine.Create(Options(d)));
                Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
                e = Assert.Throws<PvllmException>(() => Engine.EstimateMemory(Options(d)));
                Assert.AreEqual(PvllmStatus.InvalidArgument, e.Status, e.Message);
            }
        }
    }
}
