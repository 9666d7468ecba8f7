pub mod bigmodule;
