using System.IO;
using System.Linq;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// A .pvllm model file (libpvllm 0.7), the tiny model converted by
    /// $PVLLM_MAKE_TINY_MODEL --pvllm: it serves the folder's tokens under
    /// every checksum mode, and a damaged tensor is refused by name.
    /// </summary>
    [TestFixture]
    public class PvllmFileTests
    {
        private static int[] Generate(EngineOptions options)
        {
            options.KvCacheBytes = 8L << 20;
            options.NumThreads = 1;
            using (Engine engine = Engine.Create(options))
            {
                SamplingParams p = SamplingParams.Greedy(12);
                p.IgnoreEos = true;
                return engine.Generate(new Request("Once upon a time", p)).Samples[0].TokenIds.ToArray();
            }
        }

        [Test]
        public void ServesTheFoldersTokensUnderEveryChecksumMode()
        {
            int[] want = Generate(new EngineOptions(TinyModel.Path));
            Assert.AreEqual(12, want.Length);
            foreach (ModelChecksums mode in new[] { ModelChecksums.Full, ModelChecksums.Lazy, ModelChecksums.None })
            {
                int[] got = Generate(new EngineOptions(TinyModel.PvllmPath) { ModelChecksums = mode });
                CollectionAssert.AreEqual(want, got, mode.ToString());
            }
        }

        [Test]
        public void ADamagedTensorIsCorruptModelNamingIt()
        {
            string damaged = Path.Combine(Path.GetDirectoryName(TinyModel.PvllmPath), "damaged.pvllm");
            byte[] bytes = File.ReadAllBytes(TinyModel.PvllmPath);
            bytes[bytes.Length - 1] ^= 0x40;  // inside the last tensor, the packed head
            File.WriteAllBytes(damaged, bytes);
            foreach (ModelChecksums mode in new[] { ModelChecksums.Full, ModelChecksums.Lazy })
            {
                var e = Assert.Throws<PvllmException>(
                    () => Engine.Create(new EngineOptions(damaged) { ModelChecksums = mode }));
                Assert.AreEqual(PvllmStatus.CorruptModel, e.Status, e.Message);
                StringAssert.Contains("lm_head.weight does not match its checksum", e.Message);
            }
            using (Engine.Create(new EngineOptions(damaged) { ModelChecksums = ModelChecksums.None, KvCacheBytes = 8L << 20 }))
            {
            }
        }
    }
}
