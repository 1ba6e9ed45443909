"""An export, planned once and written: the plan and its options, the functions of a decoder
and its encoders, layer ranges and streamed exports, the conversion, and Apple's engine
contract."""
