// Streams the greedy continuation of one prompt with the pvllm C# SDK.
// Usage: mono StreamGenerate.exe MODEL_PATH "PROMPT" [MAX_TOKENS]
using System;
using Pvllm;

internal static class StreamGenerate
{
    private static int Main(string[] args)
    {
        if (args.Length < 2)
        {
            Console.Error.WriteLine("usage: StreamGenerate MODEL_PATH PROMPT [MAX_TOKENS]");
            return 2;
        }
        int maxTokens = args.Length > 2 ? int.Parse(args[2]) : 64;
        try
        {
            var options = new EngineOptions(args[0]) { KvCacheBytes = 64L << 20 };
            using (Engine engine = Engine.Create(options))
            {
                Console.Write(args[1]);
                FinishReason reason = FinishReason.None;
                int numTokens = 0;
                foreach (Output output in engine.Stream(new Request(args[1], SamplingParams.Greedy(maxTokens))))
                {
                    Console.Write(output.Text);
                    numTokens += output.TokenIds.Count;
                    if (output.IsFinished) reason = output.FinishReason;
                    if (output.FinishReason == FinishReason.Error)
                    {
                        Console.Error.WriteLine("\nrequest failed: " + output.ErrorMessage);
                        return 1;
                    }
                }
                Console.WriteLine();
                Console.Error.WriteLine($"[{numTokens} tokens, finished: {reason}]");
            }
            return 0;
        }
        catch (PvllmException e)
        {
            Console.Error.WriteLine($"pvllm: {e.Message} ({e.StatusText})");
            return 1;
        }
    }
}
