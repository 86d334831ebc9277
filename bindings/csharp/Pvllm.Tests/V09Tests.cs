using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using NUnit.Framework;

namespace Pvllm.Tests
{
    /// <summary>
    /// What libpvllm 0.9 appends to requests, through the binding:
    /// Request.AddSpecialTokens. The prompt the engine saw is read back from
    /// its prompt logprobs (every prompt token but the first) and the
    /// request's prompt token count.
    /// </summary>
    [TestFixture]
    public class V09Tests
    {
        private const string Text = "Hello world";
        private Engine engine;

        [SetUp]
        public void CreateEngine() => engine = TinyModel.CreateEngine();

        [TearDown]
        public void DisposeEngine() => engine?.Dispose();

        /// <summary>One token, with every prompt token's logprob.</summary>
        internal static SamplingParams WithPromptLogprobs()
        {
            SamplingParams p = SamplingParams.Greedy(1);
            p.IgnoreEos = true;
            p.PromptLogprobs = 0;
            return p;
        }

        /// <summary>Asserts that `g`'s prompt was `ids`: its count, and every token after the first.</summary>
        internal static void AssertPromptWas(IReadOnlyList<int> ids, Generation g, string what)
        {
            Assert.IsNotNull(g.Metrics, what + ": no metrics");
            Assert.AreEqual(ids.Count, g.Metrics.NumPromptTokens, what + ": prompt tokens");
            Assert.IsNotNull(g.PromptLogprobs, what + ": no prompt logprobs");
            CollectionAssert.AreEqual(ids.Skip(1).ToList(), g.PromptLogprobs.Select(l => l.TokenId).ToList(),
                                      what + ": prompt ids after the first");
        }

        [Test]
        public void AddSpecialTokensIsOnByDefaultAndOffLeavesTheBosOut()
        {
            Assert.IsTrue(new Request(Text).AddSpecialTokens, "a text prompt adds them by default");
            Assert.IsTrue(new Request(new[] { 1, 2 }).AddSpecialTokens);
            int bos = ModelInfo.Inspect(TinyModel.Path).BosTokenId;
            int[] plain = engine.Tokenize(Text);
            int[] withBos = engine.Tokenize(Text, addBos: true);
            Assert.AreEqual(bos, withBos[0]);
            CollectionAssert.AreEqual(plain, withBos.Skip(1).ToList());

            AssertPromptWas(withBos, engine.Generate(new Request(Text, WithPromptLogprobs())), "default");
            AssertPromptWas(withBos, engine.Generate(new Request(Text, WithPromptLogprobs()) { AddSpecialTokens = true }),
                            "true");
            AssertPromptWas(plain, engine.Generate(new Request(Text, WithPromptLogprobs()) { AddSpecialTokens = false }),
                            "false");
            // Through Submit and Poll as well.
            ulong id = engine.Submit(new Request(Text, WithPromptLogprobs()) { AddSpecialTokens = false });
            var outputs = new List<Output>();
            for (int step = 0; !outputs.Any(o => o.RequestFinished); step++)
            {
                Assert.Less(step, 1000, "the request never finished");
                engine.Step();
                outputs.AddRange(engine.Poll().Where(o => o.RequestId == id));
            }
            Assert.AreEqual(plain.Length, outputs.Last().Metrics.NumPromptTokens);
        }

        [Test]
        public void SpecialTokensWrittenInTheTextStillCount()
        {
            // What a chat template writes: its own BOS, read as the BOS token.
            int[] withBos = engine.Tokenize(Text, addBos: true);
            var once = new Request("<s>" + Text, WithPromptLogprobs()) { AddSpecialTokens = false };
            AssertPromptWas(withBos, engine.Generate(once), "<s> written, none added");
            Generation twice = engine.Generate(new Request("<s>" + Text, WithPromptLogprobs()));
            Assert.AreEqual(withBos.Length + 1, twice.Metrics.NumPromptTokens, "<s> written and BOS added");
            Assert.AreEqual(withBos[0], twice.PromptLogprobs[0].TokenId, "the second BOS");
        }

        [Test]
        public void WhatAnOlderLibraryWouldIgnoreIsUnsupportedThere()
        {
            // This library has what 0.9 added; one release newer it would not.
            Library.Require(NativeMethods.VersionNumber09, "Tokenizer");
            uint newer = (Engine.VersionNumber / 100 + 1) * 100;
            var e = Assert.Throws<PvllmException>(() => Library.Require(newer, "Something"));
            Assert.AreEqual(PvllmStatus.Unsupported, e.Status);
            Assert.AreEqual($"Something needs libpvllm {newer / 10000}.{newer / 100 % 100} or newer; " +
                            $"the loaded one is {Engine.Version}", e.Message);
        }

        [Test]
        public void AddSpecialTokensIsIgnoredForTokenIds()
        {
            int[] ids = engine.Tokenize(Text);
            AssertPromptWas(ids, engine.Generate(new Request(ids, WithPromptLogprobs()) { AddSpecialTokens = true }),
                            "ids, true");
            AssertPromptWas(ids, engine.Generate(new Request(ids, WithPromptLogprobs()) { AddSpecialTokens = false }),
                            "ids, false");
        }
    }

    /// <summary>
    /// Engine.ChatRequest on a tiny model serving Llama 3.1's tokenizer.json,
    /// whose chat template writes &lt;|begin_of_text|&gt; itself: the prompt
    /// the engine sees starts with exactly one BOS. Needs the reference
    /// tokenizers (scripts/reference/install.sh, PVLLM_REFERENCE_TOKENIZERS);
    /// ignored with the reason without them.
    /// </summary>
    [TestFixture]
    public class Llama31ChatTests
    {
        private const string Conversation =
            "[{\"role\": \"system\", \"content\": \"You are terse.\"}," +
            " {\"role\": \"user\", \"content\": \"Hi there!\"}]";
        private string tempDir;
        private string model;

        [TestFixtureSetUp]
        public void MakeModel()
        {
            string tokenizer = TinyModel.ReferenceTokenizer("tokenizer-llama3_1");
            tempDir = Path.Combine(Path.GetTempPath(), "pvllm-cs-llama31-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(tempDir);
            model = Path.Combine(tempDir, "model");
            // Llama 3.1's 128256 ids over the smallest model that runs.
            TinyModel.RunMaker(model, "--tokenizer \"" + tokenizer + "\" --hidden 16 --heads 2 --kv-heads 1 " +
                                      "--intermediate 16 --layers 1");
        }

        [TestFixtureTearDown]
        public void RemoveModel()
        {
            if (tempDir != null && Directory.Exists(tempDir)) Directory.Delete(tempDir, true);
        }

        [Test]
        public void ChatRequestsPromptStartsWithExactlyOneBos()
        {
            // One engine, no Tokenizer: loading this tokenizer.json takes seconds.
            using (Engine engine = Engine.Create(new EngineOptions(model) { KvCacheBytes = 8L << 20, NumThreads = 1 }))
            {
                int bos = ModelInfo.Inspect(model).BosTokenId;
                Assert.AreEqual(128000, bos);

                string rendered = engine.ApplyChatTemplate(Conversation);
                StringAssert.StartsWith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>", rendered);
                int[] expected = engine.Tokenize(rendered, addBos: false);
                Assert.AreEqual(bos, expected[0]);
                Assert.AreEqual(1, expected.Count(id => id == bos), "the template writes one BOS");

                Request chat = engine.ChatRequest(Conversation, V09Tests.WithPromptLogprobs());
                Assert.AreEqual(rendered, chat.PromptText);
                Assert.IsFalse(chat.AddSpecialTokens);
                Generation g = engine.Generate(chat);
                V09Tests.AssertPromptWas(expected, g, "ChatRequest");
                Assert.AreNotEqual(bos, g.PromptLogprobs[0].TokenId, "a second BOS");

                // The rendered text as a plain request: the BOS the tokenizer adds comes on top.
                Generation doubled = engine.Generate(new Request(rendered, V09Tests.WithPromptLogprobs()));
                Assert.AreEqual(expected.Length + 1, doubled.Metrics.NumPromptTokens);
                Assert.AreEqual(bos, doubled.PromptLogprobs[0].TokenId, "the second BOS");
            }
        }
    }
}
