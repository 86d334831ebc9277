// Serves many requests at once with the pvllm C# SDK: each GenerateAsync
// call submits its request and the engine batches them all in the same steps.
// Usage: mono ConcurrentRequests.exe MODEL_PATH [NUM_REQUESTS]
using System;
using System.Diagnostics;
using System.Linq;
using System.Threading.Tasks;
using Pvllm;

internal static class ConcurrentRequests
{
    private static readonly string[] Prompts =
    {
        "Once upon a time", "The little dog", "One day, a girl", "Tom and his friend", "In the park",
    };

    private static async Task<int> Run(string modelPath, int numRequests)
    {
        using (Engine engine = Engine.Create(new EngineOptions(modelPath) { KvCacheBytes = 64L << 20 }))
        {
            var clock = Stopwatch.StartNew();
            Task<Generation>[] tasks = Enumerable.Range(0, numRequests).Select(i =>
            {
                var sampling = new SamplingParams { Temperature = 0.8f, TopP = 0.95f, MaxTokens = 48, Seed = (ulong)i };
                return engine.GenerateAsync(new Request(Prompts[i % Prompts.Length], sampling));
            }).ToArray();
            Generation[] results = await Task.WhenAll(tasks);
            clock.Stop();

            int numTokens = 0;
            for (int i = 0; i < results.Length; i++)
            {
                Sample s = results[i].Samples[0];
                numTokens += s.TokenIds.Count;
                Console.WriteLine($"[{i}] {Prompts[i % Prompts.Length]}{s.Text}  ({s.FinishReason})");
            }
            EngineStats stats = engine.GetStats();
            Console.WriteLine($"{numRequests} requests, {numTokens} tokens in {clock.Elapsed.TotalSeconds:F2} s; " +
                              $"{stats.NumSteps} steps, {stats.NumPreemptions} preemptions");
            return 0;
        }
    }

    private static int Main(string[] args)
    {
        if (args.Length < 1)
        {
            Console.Error.WriteLine("usage: ConcurrentRequests MODEL_PATH [NUM_REQUESTS]");
            return 2;
        }
        try
        {
            return Run(args[0], args.Length > 1 ? int.Parse(args[1]) : 16).GetAwaiter().GetResult();
        }
        catch (PvllmException e)
        {
            Console.Error.WriteLine($"pvllm: {e.Message} ({e.StatusText})");
            return 1;
        }
    }
}
