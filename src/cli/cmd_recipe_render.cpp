// `deepinfer recipe render`: API request → DeepSeek V4 / V4.1 prompt text.
//
// stdin:  {"protocol": "chat_completions"|"responses"|"messages", "encoding": "v4"|"v41"
//          (default "v41"), "request": <API request body>}
// stdout: {"prompt": "<rendered prompt>", "image_sources": [<source>, ...]}, exit 0.
//         Each image source, in placeholder order, is one of
//           {"type":"url","url":"https://...","detail":D}
//           {"type":"data_url","url":"data:image/png;base64,...","detail":D}
//           {"type":"base64","media_type":"image/png","data":"<base64>","detail":D}
//         with D = "low" | "high" | "original" | "auto".
// Errors: stdout {"error":{"type":"invalid_request_error"|"internal_error","message":"..."}},
//         exit 1 (malformed stdin, missing fields, and every request conversion error).
#include <iostream>

#include "cli/command.h"
#include "cli/recipe_io.h"
#include "recipe/render.h"

namespace deepinfer::cli {
namespace {

std::string_view detail_name(recipe::ImageDetail detail) {
  switch (detail) {
    case recipe::ImageDetail::Low:
      return "low";
    case recipe::ImageDetail::High:
      return "high";
    case recipe::ImageDetail::Original:
      return "original";
    case recipe::ImageDetail::Auto:
      return "auto";
  }
  return "high";
}

Json image_source_json(const recipe::ImageSource& source) {
  JsonObject out;
  switch (source.kind) {
    case recipe::ImageSource::Kind::Url:
      out["type"] = "url";
      out["url"] = source.data;
      break;
    case recipe::ImageSource::Kind::DataUrl:
      out["type"] = "data_url";
      out["url"] = source.data;
      break;
    case recipe::ImageSource::Kind::Bytes:
      out["type"] = "base64";
      out["media_type"] = source.media_type;
      out["data"] = source.data;
      break;
  }
  out["detail"] = detail_name(source.detail);
  return out;
}

void run_render() {
  auto envelope = read_recipe_envelope(std::cin);
  if (!envelope.ok()) fail_recipe(envelope.error());
  auto request = convert_envelope(envelope.value());
  if (!request.ok()) fail_recipe(request.error());
  const recipe::RenderedPrompt rendered =
      recipe::render_prompt(request.value().conversation, envelope.value().encoding);
  JsonArray images;
  for (const auto& source : rendered.image_sources) images.push_back(image_source_json(source));
  JsonObject out;
  out["prompt"] = rendered.prompt;
  out["image_sources"] = std::move(images);
  print_json_line(std::cout, out);
}

void setup(CLI::App& app) {
  auto* cmd = recipe_command(app).add_subcommand(
      "render", "Render an API request (JSON envelope on stdin) into a V4 / V4.1 prompt");
  cmd->callback(run_render);
}

DEEPINFER_COMMAND(setup);

}  // namespace
}  // namespace deepinfer::cli
