using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text.RegularExpressions;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>Engine lifetime, errors, defaults, tokenizer and model inspection.</summary>
    [TestFixture]
    public class EngineTests
    {
        private static PvllmException ThrowsPvllm(PvllmStatus status, TestDelegate call)
        {
            var e = Assert.Throws<PvllmException>(call);
            Assert.AreEqual(status, e.Status, e.ToString());
            Assert.IsNotEmpty(e.Message);
            return e;
        }

        [Test]
        public void VersionsAgree()
        {
            string version = Engine.Version;
            StringAssert.IsMatch(@"^\d+\.\d+\.\d+$", version);
            int[] parts = version.Split('.').Select(int.Parse).ToArray();
            Assert.AreEqual((uint)(parts[0] * 10000 + parts[1] * 100 + parts[2]), Engine.VersionNumber);
            Assert.AreEqual(Engine.BindingAbiVersion, Engine.AbiVersion);
        }

        [Test]
        public void DefaultsComeFromTheLibrary()
        {
            var s = new SamplingParams();
            Assert.AreEqual(1f, s.Temperature);
            Assert.AreEqual(0, s.TopK);
            Assert.AreEqual(1f, s.TopP);
            Assert.AreEqual(0f, s.MinP);
            Assert.AreEqual(1f, s.RepetitionPenalty);
            Assert.AreEqual(16, s.MaxTokens);
            Assert.AreEqual(-1, s.Logprobs);
            Assert.AreEqual(1, s.N);
            Assert.IsFalse(s.IgnoreEos);
            Assert.IsNull(s.Seed);

            var o = new EngineOptions("model");
            Assert.AreEqual("model", o.ModelPath);
            Assert.AreEqual(16, o.BlockSize);
            Assert.AreEqual(256L << 20, o.KvCacheBytes);
            Assert.AreEqual(0, o.NumKvBlocks);
            Assert.AreEqual(256, o.MaxNumSeqs);
            Assert.AreEqual(2048, o.MaxNumBatchedTokens);
            Assert.IsTrue(o.EnablePrefixCaching);
        }

        [Test]
        public void MissingModelIsNotFoundAndNamesThePath()
        {
            string path = Path.Combine(Path.GetTempPath(), "pvllm-no-such-model-" + Guid.NewGuid().ToString("N"));
            var e = ThrowsPvllm(PvllmStatus.NotFound, () => Engine.Create(new EngineOptions(path)));
            StringAssert.Contains(path, e.Message);
            Assert.AreEqual("PVLLM_STATUS_NOT_FOUND", e.StatusText);

            e = ThrowsPvllm(PvllmStatus.NotFound, () => Engine.EstimateMemory(new EngineOptions(path)));
            StringAssert.Contains(path, e.Message);
            ThrowsPvllm(PvllmStatus.NotFound, () => ModelInfo.Inspect(path));
        }

        [Test]
        public void RandomWeightsModelGeneratesFromTokenIds()
        {
            var o = new EngineOptions { RandomWeights = "tiny", NumThreads = 1 };
            using (Engine engine = Engine.Create(o))
            {
                SamplingParams p = SamplingParams.Greedy(5);
                p.IgnoreEos = true;
                Generation g = engine.Generate(new Request(new[] { 1, 7, 42 }, p));
                Assert.AreEqual(5, g.Samples[0].TokenIds.Count);
                ThrowsPvllm(PvllmStatus.TokenizerError, () => engine.Generate(new Request("hello", p)));
            }
            Assert.AreEqual(2048, ModelInfo.InspectRandom("tiny").MaxPositionEmbeddings);
            ThrowsPvllm(PvllmStatus.InvalidArgument, () => ModelInfo.InspectRandom("no-such-shape"));
        }

        [Test]
        public void EveryDtypeIsAcceptedAndLeavesTheCpuUnchanged()
        {
            SamplingParams p = SamplingParams.Greedy(5);
            p.IgnoreEos = true;
            var prompt = new Request(new[] { 1, 7, 42 }, p);
            IReadOnlyList<int> plain;
            using (Engine engine = Engine.Create(new EngineOptions { RandomWeights = "tiny", NumThreads = 1 }))
            {
                plain = engine.Generate(prompt).Samples[0].TokenIds;
            }
            Assert.AreEqual(3, (int)Dtype.Fp32);
            foreach (Dtype dtype in new[] { Dtype.Bf16, Dtype.Fp16, Dtype.Fp32 })
            {
                var o = new EngineOptions { RandomWeights = "tiny", NumThreads = 1, Device = "cpu", Dtype = dtype };
                using (Engine engine = Engine.Create(o))
                {
                    CollectionAssert.AreEqual(plain, engine.Generate(prompt).Samples[0].TokenIds, dtype.ToString());
                }
            }
        }

        [Test]
        public void NonAsciiModelPathReachesTheLibraryIntact()
        {
            string path = Path.Combine(Path.GetTempPath(), "pvllm-café-你好-" + Guid.NewGuid().ToString("N"));
            var e = ThrowsPvllm(PvllmStatus.NotFound, () => Engine.Create(new EngineOptions(path)));
            StringAssert.Contains(path, e.Message);
        }

        [Test]
        public void BadEngineOptionsAreInvalidArgument()
        {
            EngineOptions o = TinyModel.Options();
            o.BlockSize = 7;
            ThrowsPvllm(PvllmStatus.InvalidArgument, () => Engine.Create(o));
            ThrowsPvllm(PvllmStatus.InvalidArgument, () => Engine.Create(new EngineOptions()));
            o = TinyModel.Options();
            o.Device = "tpu";
            var e = Assert.Throws<PvllmException>(() => Engine.Create(o));
            Assert.That(e.Status, Is.EqualTo(PvllmStatus.Unsupported).Or.EqualTo(PvllmStatus.InvalidArgument));
        }

        [Test]
        public void BadRequestsAreInvalidArgument()
        {
            using (Engine engine = TinyModel.CreateEngine())
            {
                ThrowsPvllm(PvllmStatus.InvalidArgument,
                    () => engine.Submit(new Request("hi", new SamplingParams { TopP = 0f })));
                ThrowsPvllm(PvllmStatus.InvalidArgument,
                    () => engine.Submit(new Request("hi", new SamplingParams { MaxTokens = 0 })));
                ThrowsPvllm(PvllmStatus.InvalidArgument,
                    () => engine.Submit(new Request("hi", new SamplingParams { N = 100000 })));
                ThrowsPvllm(PvllmStatus.InvalidArgument, () => engine.Submit(new Request("")));
                ThrowsPvllm(PvllmStatus.InvalidArgument, () => engine.Submit(new Request(new[] { 1, 1 << 20 })));
                ThrowsPvllm(PvllmStatus.InvalidArgument, () => engine.Detokenize(new[] { 1 << 20 }));
                ThrowsPvllm(PvllmStatus.NotFound, () => engine.Abort(424242));
                // A failed submit changes nothing.
                Assert.AreEqual(0, engine.Step());
                Assert.IsEmpty(engine.Poll());
            }
        }

        [Test]
        public void StopStringsHoldingANulAreInvalidArgument()
        {
            using (Engine engine = TinyModel.CreateEngine())
            {
                // C would read "a" and "b" only: refused, as a constraint with a NUL is.
                foreach (string[] stops in new[] { new[] { "a\0b" }, new[] { "ok", "\0" } })
                {
                    var p = new SamplingParams { MaxTokens = 4 };
                    p.Stop = stops.ToList();
                    PvllmException e = ThrowsPvllm(PvllmStatus.InvalidArgument,
                                                   () => engine.Submit(new Request("hi", p)));
                    Assert.AreEqual("a stop string contains a NUL character", e.Message);
                    e = ThrowsPvllm(PvllmStatus.InvalidArgument,
                                    () => engine.Stream(new Request("hi", p)).ToList());
                    StringAssert.Contains("NUL", e.Message);
                }
                var nullStop = new SamplingParams { Stop = new List<string> { null } };
                Assert.Throws<ArgumentException>(() => engine.Submit(new Request("hi", nullStop)));
                // Nothing was queued.
                Assert.AreEqual(0, engine.Step());
                Assert.IsEmpty(engine.Poll());
            }
        }

        [Test]
        public void ProgressIsReportedWhileLoading()
        {
            EngineOptions o = TinyModel.Options();
            float last = -1f;
            int calls = 0;
            o.Progress = (fraction, stage) =>
            {
                Assert.GreaterOrEqual(fraction, last);
                Assert.LessOrEqual(fraction, 1f);
                Assert.IsNotEmpty(stage);
                last = fraction;
                calls++;
            };
            using (Engine.Create(o)) { }
            Assert.Greater(calls, 0);
        }

        [Test]
        public void ExceptionInProgressCallbackIsRethrownByCreate()
        {
            EngineOptions o = TinyModel.Options();
            o.Progress = (fraction, stage) => throw new InvalidTimeZoneException("from the callback");
            var e = Assert.Throws<InvalidTimeZoneException>(() => Engine.Create(o));
            Assert.AreEqual("from the callback", e.Message);
        }

        [Test]
        public void DisposeTwiceIsSafeAndUseAfterDisposeThrows()
        {
            Engine engine = TinyModel.CreateEngine();
            Assert.IsFalse(engine.IsDisposed);
            engine.Dispose();
            engine.Dispose();
            Assert.IsTrue(engine.IsDisposed);
            Assert.Throws<ObjectDisposedException>(() => engine.Submit("hi"));
            Assert.Throws<ObjectDisposedException>(() => engine.Step());
            Assert.Throws<ObjectDisposedException>(() => engine.Poll());
            Assert.Throws<ObjectDisposedException>(() => engine.Abort(1));
            Assert.Throws<ObjectDisposedException>(() => engine.GetStats());
            Assert.Throws<ObjectDisposedException>(() => engine.Tokenize("hi"));
            Assert.Throws<ObjectDisposedException>(() => engine.Detokenize(new[] { 1 }));
            Assert.Throws<ObjectDisposedException>(() => engine.Stream(new Request("hi")));
            var e = Assert.Throws<AggregateException>(() => engine.GenerateAsync(new Request("hi")).Wait());
            Assert.IsInstanceOf<ObjectDisposedException>(e.InnerException);
        }

        [Test]
        public void NonAsciiTextRoundTripsThroughTheTokenizer()
        {
            using (Engine engine = TinyModel.CreateEngine())
            {
                const string text = "café 你好";
                int[] ids = engine.Tokenize(text);
                Assert.IsNotEmpty(ids);
                Assert.AreEqual(text, engine.Detokenize(ids));

                int[] withBos = engine.Tokenize(text, addBos: true);
                Assert.AreEqual(ids.Length + 1, withBos.Length);
                Assert.AreEqual(ModelInfo.Inspect(TinyModel.Path).BosTokenId, withBos[0]);
                CollectionAssert.AreEqual(ids, withBos.Skip(1).ToArray());

                Assert.IsEmpty(engine.Tokenize(""));
                Assert.AreEqual("", engine.Detokenize(new int[0]));

                // Long inputs take the buffer-growing paths.
                string longText = string.Concat(Enumerable.Repeat("héllo wörld ", 200));
                Assert.AreEqual(longText.TrimEnd(' '), engine.Detokenize(engine.Tokenize(longText)).TrimEnd(' '));
            }
        }

        [Test]
        public void InspectReadsTheTinyModelsConfig()
        {
            ModelInfo info = ModelInfo.Inspect(TinyModel.Path);
            string config = File.ReadAllText(Path.Combine(TinyModel.Path, "config.json"));
            Assert.AreEqual("huggingface", info.Format);
            Assert.IsNotEmpty(info.Architecture);
            Assert.AreEqual(JsonInt(config, "hidden_size"), info.HiddenSize);
            Assert.AreEqual(JsonInt(config, "num_hidden_layers"), info.NumLayers);
            Assert.AreEqual(JsonInt(config, "num_attention_heads"), info.NumHeads);
            Assert.AreEqual(JsonInt(config, "num_key_value_heads"), info.NumKvHeads);
            Assert.AreEqual(JsonInt(config, "vocab_size"), info.VocabSize);
            Assert.AreEqual(JsonInt(config, "bos_token_id"), info.BosTokenId);
            Assert.AreEqual(JsonInt(config, "eos_token_id"), info.EosTokenId);
            Assert.IsNotEmpty(info.Tensors);
            TensorInfo embed = info.Tensors.FirstOrDefault(t => t.Name.Contains("embed_tokens"));
            Assert.IsNotNull(embed, string.Join(", ", info.Tensors.Select(t => t.Name)));
            CollectionAssert.AreEqual(new long[] { info.VocabSize, info.HiddenSize }, embed.Shape);
            Assert.That(embed.DType, Is.EqualTo("F32").Or.EqualTo("F16").Or.EqualTo("BF16"));
        }

        [Test]
        public void MemoryEstimateMatchesTheEngine()
        {
            EngineOptions o = TinyModel.Options();
            MemoryEstimate m = Engine.EstimateMemory(o);
            Assert.Greater(m.WeightBytes, 0UL);
            Assert.Greater(m.NumBlocks, 0);
            Assert.AreEqual((ulong)m.NumBlocks * m.KvBytesPerBlock, m.KvBytesTotal);
            Assert.AreEqual((long)m.NumBlocks * o.BlockSize, m.MaxTokensInCache);
            using (Engine engine = Engine.Create(o))
            {
                Assert.AreEqual(m.NumBlocks, engine.GetStats().NumBlocksTotal);
            }
            o.BlockSize = 3;
            ThrowsPvllm(PvllmStatus.InvalidArgument, () => Engine.EstimateMemory(o));
        }

        private static int JsonInt(string json, string key)
        {
            Match m = Regex.Match(json, "\"" + key + "\"\\s*:\\s*(-?\\d+)");
            Assert.IsTrue(m.Success, key + " in config.json");
            return int.Parse(m.Groups[1].Value);
        }
    }
}
