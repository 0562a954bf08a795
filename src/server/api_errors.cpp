#include "server/api_errors.h"

#include "recipe/python_json.h"

namespace deepinfer::server {
namespace {

std::string_view openai_type_for(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "internal_error" : "invalid_request_error";
  }
}

std::string_view anthropic_type_for(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

}  // namespace

ApiFlavor flavor_for_path(std::string_view path) {
  return path.starts_with("/v1/messages") ? ApiFlavor::Anthropic : ApiFlavor::OpenAI;
}

ApiFlavor flavor_for(recipe::Protocol protocol) {
  return protocol == recipe::Protocol::Messages ? ApiFlavor::Anthropic : ApiFlavor::OpenAI;
}

HttpResponse api_error(ApiFlavor flavor, int status, std::string_view message,
                       std::string_view openai_type) {
  HttpResponse r;
  r.status = status;
  std::string& b = r.body;
  if (flavor == ApiFlavor::Anthropic) {
    b = R"({"type":"error","error":{"type":")";
    b += anthropic_type_for(status);
    b += R"(","message":")";
    recipe::append_json_escaped(b, message);
    b += "\"}}";
  } else {
    const std::string_view type = openai_type.empty() ? openai_type_for(status) : openai_type;
    b = R"({"error":{"message":")";
    recipe::append_json_escaped(b, message);
    b += R"(","type":")";
    b += type;
    b += R"(","param":null,"code":")";
    b += type;
    b += "\"}}";
  }
  return r;
}

}  // namespace deepinfer::server
