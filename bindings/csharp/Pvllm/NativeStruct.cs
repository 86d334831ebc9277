using System;
using System.Runtime.InteropServices;

namespace Pvllm
{
    /// <summary>
    /// Fills a parameter struct with its *_init function.
    ///
    /// pvllm structs only grow at the end, and *_init takes the caller's
    /// struct size: the library writes the defaults of the fields that fit in
    /// that size and zeroes what it does not know, and later reads and writes
    /// only what struct_size covers. So this binding passes its own size and
    /// works with older and newer libraries alike.
    /// </summary>
    internal static class NativeStruct
    {
        internal delegate void InitFn(IntPtr p, UIntPtr structSize);

        internal static T Init<T>(InitFn init) where T : struct
        {
            int ours = Marshal.SizeOf(typeof(T));
            IntPtr buffer = Marshal.AllocHGlobal(ours);
            try
            {
                Marshal.Copy(new byte[ours], 0, buffer, ours);
                init(buffer, (UIntPtr)ours);
                return Marshal.PtrToStructure<T>(buffer);
            }
            finally
            {
                Marshal.FreeHGlobal(buffer);
            }
        }
    }
}
