#ifndef ML_VERSION_H
#define ML_VERSION_H
/* The build's version (CMakeLists.txt) and the commit it was built from, written at every build
 * (scripts/git_commit.cmake) so that a rebuild after a checkout names the new commit. */
#ifndef MECHLAB_VERSION
#define MECHLAB_VERSION "unknown"
#endif
extern const char mechlab_git[];
#endif
