// The fixed apply_patch tool that stands in for the Responses `custom` tool of that name
// (api spec §4). The parameters are the spec's; the description is this project's own wording
// (the reference adapter's text is not reproduced), so prompts with this tool differ from the
// reference in that one string.
#include "recipe/convert_common.h"

namespace deepinfer::recipe::convert {

const char* const kApplyPatchParameters =
    R"({"type":"object","additionalProperties":false,"properties":{"input":{"type":"string",)"
    R"("description":"The entire contents of the apply_patch command (the *** Begin Patch )"
    R"(... *** End Patch envelope)."}},"required":["input"]})";

const char* const kApplyPatchDescription =
    "Edit files by sending one patch in the `input` parameter. A patch starts with the line "
    "`*** Begin Patch` and ends with `*** End Patch`. Between them, each file operation begins "
    "with a header line: `*** Add File: <path>` (followed by the new file's lines, each prefixed "
    "with `+`), `*** Delete File: <path>` (nothing follows), or `*** Update File: <path>` "
    "(optionally followed by `*** Move to: <new path>`). An update lists hunks, each introduced by "
    "`@@` with an optional line of context to locate it; hunk lines start with ` ` (unchanged "
    "context), `-` (removed) or `+` (added). Use paths relative to the working directory.";

}  // namespace deepinfer::recipe::convert
