/* oneCCL's CPU archive (oneccl-devel's lib/ccl/cpu/lib/libccl.a) is built
 * with Intel's ITT tracing hooks and leaves their function pointers
 * undefined, for Intel's libittnotify to supply. No package here holds
 * that library. These are the pointers it would define, left NULL: the
 * state it gives them when no profiler (VTune) is attached, in which the
 * hooks' call sites (ittnotify.h's macros test the pointer first) do
 * nothing. Only oneccl_perf links this file. */
void* __itt_domain_create_ptr__3_0 = 0;
void* __itt_event_create_ptr__3_0 = 0;
void* __itt_event_end_ptr__3_0 = 0;
void* __itt_event_start_ptr__3_0 = 0;
void* __itt_metadata_add_ptr__3_0 = 0;
void* __itt_string_handle_create_ptr__3_0 = 0;
void* __itt_task_begin_ptr__3_0 = 0;
void* __itt_task_end_ptr__3_0 = 0;
void* __itt_thread_set_name_ptr__3_0 = 0;
