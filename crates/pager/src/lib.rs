//! The live pager: regions paged on userfaultfd under a frame budget and a
//! policy of the application's choice.
