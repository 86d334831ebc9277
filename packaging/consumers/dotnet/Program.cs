// A .NET console program that uses pvllm the way a NuGet user does: it
// references the Pvllm package and nothing of this source tree. Prints the
// greedy continuation of a prompt. Usage: Program.exe MODEL_PATH PROMPT
using System;
using Pvllm;

internal static class Program
{
    private static int Main(string[] args)
    {
        if (args.Length < 2)
        {
            Console.Error.WriteLine("usage: Program MODEL_PATH PROMPT");
            return 2;
        }
        var options = new EngineOptions(args[0]) { KvCacheBytes = 16L << 20 };
        using (Engine engine = Engine.Create(options))
        {
            Console.Write(args[1]);
            foreach (Output output in engine.Stream(new Request(args[1], SamplingParams.Greedy(24))))
            {
                Console.Write(output.Text);
                if (output.FinishReason == FinishReason.Error)
                {
                    Console.Error.WriteLine("request failed: " + output.ErrorMessage);
                    return 1;
                }
            }
            Console.WriteLine();
            Console.Error.WriteLine("pvllm " + Engine.Version + ", backend " + engine.GetStats().Backend);
        }
        return 0;
    }
}
